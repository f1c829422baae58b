"""What `bwtune sweep` shows of a resumed or adaptive run (issues 20 #5, 21 #6, #7): the
node's warnings, a returned line that is not a result (never a success), every config of
the plan in the table (measured, screened out with its screen value, left out by the
strategy, duplicate of a shown row), the prior's runs named, and a finished adaptive run
never read as unfinished."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import ansible_run, exit_codes
from bwtune.ansible_run import RunnerEvent
from bwtune.app import sweep_service
from bwtune.commands import _sweep_output as sweep_output
from bwtune.commands import sweep_command as sweep
from bwtune.progress import FOLLOW_TASK, SweepState

RUN = "20261201T120000Z-beef"
HOST = "gpu1"
WORKLOAD = "chat"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    return tmp_path / "home"


def request() -> sweep.SweepRequest:
    inventory = ansible_run.Inventory(path=Path("/inv.yml"), hostvars={HOST: {}})
    matrix = {"model": {"path": "/m"}, "workloads": [{"name": WORKLOAD}]}
    return sweep.SweepRequest(inventory=inventory, matrix=matrix, matrix_source="m.yml", run_id=RUN)


def block(value: float) -> dict[str, Any]:
    return {"n": 1, "values": {"output_throughput": value}, "repetitions": [{"output_throughput": value}]}


def ok(config: str, value: float, point: str, **extra: Any) -> dict[str, Any]:
    metrics = extra.pop("metrics", {WORKLOAD: block(value)})
    return contract.make_line(
        run_id=RUN, host=HOST, config_id=config, status="ok", metrics=metrics, point={"case": point}, **extra
    )


def duplicate(config: str, of: str) -> dict[str, Any]:
    failure = contract.make_failure("duplicate", f"same launch as {of}")
    return contract.make_line(
        run_id=RUN, host=HOST, config_id=config, status="duplicate", failure=failure, duplicate_of=of,
        point={"case": "dup"},
    )  # fmt: skip


def playbook_run(result: dict[str, Any]) -> ansible_run.PlaybookRun:
    run = ansible_run.PlaybookRun(
        playbook=Path("sweep.yml"), private_data_dir=Path("/nonexistent"), ident="x"
    )
    run.artifact_data = {"bwtune_sweep": {HOST: result}}
    run.stats = {"ok": {HOST: 5}}
    run.rc = 0
    return run


def test_the_nodes_warnings_are_shown_and_a_line_that_is_not_a_result_fails_the_run() -> None:
    broken = ok("c0000000002", 90.0, "b")
    del broken["metrics"]
    warning = "the results file /r/results.jsonl was removed or replaced while the sweep ran: ..."
    result = {"results": [ok("c0000000001", 100.0, "a"), broken], "summary": {"warnings": [warning]}}
    done = sweep_service.collect(request(), playbook_run(result))
    assert f"warning: host {HOST}: {warning}" in done.messages
    assert any("result 2: missing key 'metrics'" in m and "not stored" in m for m in done.messages)
    assert done.exit_code == exit_codes.HOST_FAILED


def test_every_config_of_the_plan_has_a_row_and_the_prior_run_is_named() -> None:
    screened = ok("c0000000003", 0.0, "c", screened_out=True, metrics={contract.SCREEN_WORKLOAD: block(42.5)})
    lines = [ok("c0000000001", 100.0, "a"), screened, duplicate("c0000000009", "c0000000005")]
    summary = {
        "strategy": "adaptive",
        "left_out": [
            {"config": "c0000000005", "point": {"case": "e"}},
            {"config": "c0000000006", "point": {}},
        ],
    }
    req = request()
    req.prior, req.prior_runs = [{"config": "c0000000001", "score": 99.0}], ["demo-1"]
    done = sweep_service.collect(req, playbook_run({"results": lines, "summary": summary}))
    assert done.exit_code == exit_codes.OK
    out = io.StringIO()
    sweep_output.print_results_table(done.output or {}, out)
    text = out.getvalue()
    assert "ok, screened out (screen 42.5)" in text
    for config in ("c0000000001", "c0000000003", "c0000000005", "c0000000006", "c0000000009"):
        assert config in text
    assert text.count("left out by adaptive") == 2
    assert "prior: 1 configs' earlier scores from run demo-1" in text


def test_a_finished_adaptive_run_is_not_shown_as_unfinished() -> None:
    state = SweepState.for_hosts({HOST: True})
    res = {
        "progress": {"planned": 6, "done": 2, "failed": 0, "current": None, "eta_s": 0},
        "result": {
            "results": [ok("c1", 1.0, "a"), ok("c2", 2.0, "b")],
            "summary": {"left_out": [{"config": "c3"}, {"config": "c4"}, {"config": "c5"}, {"config": "c6"}]},
        },
    }
    line = state.update(RunnerEvent("ok", HOST, FOLLOW_TASK, "bwtune.sglang.sweep_progress", res, {}))
    assert line is not None and "2/2 done" in line and "finished (4 left out by the strategy)" in line
