"""What `bwtune sweep` makes of what the nodes returned: exit code and one line per problem.

The playbook run is built here from what the sweep role records (set_stats and failed
tasks), so each exit-code rule is checked without running a sweep.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract as contract
from bwtune import exit_codes, results_db, runner
from bwtune.commands import sweep

RUN = "20261130T120000Z-abcd"
HOST = "localhost"
WORKLOAD = "chat"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    return tmp_path / "home"


def request() -> sweep.SweepRequest:
    inventory = runner.Inventory(path=Path("/inv.yml"), hostvars={HOST: {}})
    matrix = {"model": {"path": "/m"}, "workloads": [{"name": WORKLOAD}]}
    return sweep.SweepRequest(inventory=inventory, matrix=matrix, matrix_source="m.yml", run_id=RUN)


def line(config: str, status: str) -> dict[str, Any]:
    if status == contract.OK:
        block = {
            "n": 1,
            "values": {"output_throughput": 100.0},
            "repetitions": [{"output_throughput": 100.0}],
        }
        return contract.make_line(
            run_id=RUN, host=HOST, config_id=config, status=status, metrics={WORKLOAD: block}
        )
    failure = contract.make_failure(status, f"{status} at start")
    return contract.make_line(run_id=RUN, host=HOST, config_id=config, status=status, failure=failure)


def playbook_run(
    result: dict[str, Any], failed_task: str | None = None, message: str = ""
) -> runner.PlaybookRun:
    """A sweep playbook run as the role leaves it: the node's result in set_stats, and the
    task that failed the host, if one did."""
    run = runner.PlaybookRun(playbook=Path("sweep.yml"), private_data_dir=Path("/nonexistent"), ident="x")
    run.artifact_data = {"bwtune_sweep": {HOST: result}}
    run.stats = {"ok": {HOST: 5}}
    run.rc = 0
    if failed_task:
        run.failures[HOST] = runner.HostFailure(HOST, "failed", failed_task, message)
        run.rc = 2
    return run


def test_a_sweep_that_measured_nothing_exits_3_with_one_line() -> None:
    result = {"results": [line("c0000000001", "crashed"), line("c0000000002", "crashed")]}
    # The role fails the host too; that says the same thing and is not a host failure.
    done = sweep._collect(
        request(), playbook_run(result, "Fail the host when no config was measured", "none")
    )
    assert done.exit_code == exit_codes.NOTHING_MEASURED == 3
    assert done.messages == [results_db.nothing_measured(done.output or {})]
    assert done.messages[0].startswith(f"run {RUN} measured nothing: every launch failed (crashed 2)")


def test_one_measured_config_is_success() -> None:
    result = {"results": [line("c0000000001", "ok"), line("c0000000002", "oom")]}
    done = sweep._collect(request(), playbook_run(result))
    assert (done.exit_code, done.messages) == (exit_codes.OK, [])
    assert [r["status"] for r in (done.output or {})["results"]] == ["ok", "oom"]


def test_a_resume_whose_node_failed_at_once_fails_though_the_run_has_results() -> None:
    first = sweep._collect(request(), playbook_run({"results": [line("c0000000001", "ok")]}))
    assert first.exit_code == exit_codes.OK
    error = f"run {RUN} is still running on this node (sweep pid 4242): follow it, or cancel it"
    done = sweep._collect(
        request(), playbook_run({"error": error}, "Fail the host when its sweep did not finish", error)
    )
    assert done.exit_code == exit_codes.HOST_FAILED
    assert done.messages == [f"host {HOST}: {error}"]  # the node's words, once
    # The run's results so far are still the run's: reported, not passed off as this attempt's success.
    assert [r["status"] for r in (done.output or {})["results"]] == ["ok"]


def test_a_node_traceback_is_shown_as_its_last_line() -> None:
    error = (
        'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: No start of json char found'
    )
    done = sweep._collect(
        request(), playbook_run({"error": error}, "Fail the host when its sweep did not finish")
    )
    assert done.exit_code == exit_codes.HOST_FAILED
    assert done.messages == [f"host {HOST}: ValueError: No start of json char found"]


def test_a_database_that_fails_at_the_end_says_where_the_results_are(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(results_db, "connect", broken)
    done = sweep._collect(request(), playbook_run({"results": [line("c0000000001", "ok")]}))
    assert done.exit_code == exit_codes.HOST_FAILED and done.output is None
    (message,) = done.messages
    assert f"{HOST}:~/.local/share/bwtune/sweeps/{RUN}/results.jsonl" in message
    assert f"bwtune import FILE --run-id {RUN}" in message
