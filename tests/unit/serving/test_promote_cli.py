"""`bwtune promote` before any host is touched: which config, and bad input as one line, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import results_db
from bwtune.commands import promote

RUN = "promote-unit-1"


def line(config_id: str, status: str, throughput: float | None, host: str = "n1") -> dict[str, Any]:
    metrics = {} if throughput is None else {"chat": {"n": 1, "values": {"output_throughput": throughput}}}
    failure = None if status == "ok" else contract.make_failure(status, "out of memory")
    return contract.make_line(
        run_id=RUN, host=host, config_id=config_id, status=status, flags={"tp-size": 8},
        argv=["--model-path", "/m", "--tp-size", "8"], metrics=metrics, failure=failure,
    )  # fmt: skip


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    conn = results_db.connect(path)
    results_db.record_run(
        conn, RUN, objective={"workload": "chat", "metric": "output_throughput", "goal": "max"}
    )
    results_db.import_results(
        conn,
        [line("cslow000001", "ok", 50.0), line("cfast000002", "ok", 80.0), line("coom0000003", "oom", None)],
    )
    conn.close()
    return path


def output(db: Path) -> dict[str, Any]:
    conn = results_db.connect(db, create=False)
    try:
        return results_db.build_run_output(conn, RUN)
    finally:
        conn.close()


def test_best_by_the_runs_objective_or_the_named_ok_config(db: Path) -> None:
    assert promote.choose_config(output(db), None)["id"] == "cfast000002"
    assert promote.choose_config(output(db), "cslow000001")["id"] == "cslow000001"


def test_a_config_that_did_not_serve_or_is_not_in_the_run_is_refused(db: Path) -> None:
    with pytest.raises(promote.BadInput, match=f"--config coom0000003: status oom in run {RUN}"):
        promote.choose_config(output(db), "coom0000003")
    with pytest.raises(promote.BadInput, match=f"--config cnope000000: no such config in run {RUN}"):
        promote.choose_config(output(db), "cnope000000")
    nothing = {"run_id": RUN, "results": [], "best": None}
    with pytest.raises(promote.BadInput, match="has no config that measured ok: nothing to promote"):
        promote.choose_config(nothing, None)


def test_the_flag_changes_read_as_a_line() -> None:
    changes = [
        {"flag": "tp-size", "old": "4", "new": "8"},
        {"flag": "enable-metrics", "old": True, "new": None},
    ]
    assert promote.describe_changes(changes) == "--tp-size 4 -> 8; --enable-metrics True -> unset"
    assert promote.describe_changes([]) == "no flag changes"
