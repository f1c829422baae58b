"""What `bwtune sweep` makes of what the nodes returned: exit code and one line per problem.

The playbook run is built here from what the sweep role records (set_stats and failed
tasks), so each exit-code rule is checked without running a sweep.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import ansible_run, exit_codes, results_db, store
from bwtune.app import sweep_service
from bwtune.commands import sweep_command as sweep

RUN = "20261130T120000Z-abcd"
HOST = "localhost"
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
) -> ansible_run.PlaybookRun:
    """A sweep playbook run as the role leaves it: the node's result in set_stats, and the
    task that failed the host, if one did."""
    run = ansible_run.PlaybookRun(
        playbook=Path("sweep.yml"), private_data_dir=Path("/nonexistent"), ident="x"
    )
    run.artifact_data = {"bwtune_sweep": {HOST: result}}
    run.stats = {"ok": {HOST: 5}}
    run.rc = 0
    if failed_task:
        run.failures[HOST] = ansible_run.HostFailure(HOST, "failed", failed_task, message)
        run.rc = 2
    return run


def test_a_sweep_that_measured_nothing_exits_3_with_one_line() -> None:
    result = {"results": [line("c0000000001", "crashed"), line("c0000000002", "crashed")]}
    # The role fails the host too; that says the same thing and is not a host failure.
    done = sweep_service.collect(
        request(), playbook_run(result, "Fail the host when no config was measured", "none")
    )
    assert done.exit_code == exit_codes.NOTHING_MEASURED == 3
    assert done.messages == [results_db.nothing_measured(done.output or {})]
    assert done.messages[0].startswith(f"run {RUN} measured nothing: every launch failed (crashed 2)")


def test_one_measured_config_is_success() -> None:
    result = {"results": [line("c0000000001", "ok"), line("c0000000002", "oom")]}
    done = sweep_service.collect(request(), playbook_run(result))
    assert (done.exit_code, done.messages) == (exit_codes.OK, [])
    assert [r["status"] for r in (done.output or {})["results"]] == ["ok", "oom"]


def test_a_resume_whose_node_failed_at_once_fails_though_the_run_has_results() -> None:
    first = sweep_service.collect(request(), playbook_run({"results": [line("c0000000001", "ok")]}))
    assert first.exit_code == exit_codes.OK
    error = f"run {RUN} is still running on this node (sweep pid 4242): follow it, or cancel it"
    done = sweep_service.collect(
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
    done = sweep_service.collect(
        request(), playbook_run({"error": error}, "Fail the host when its sweep did not finish")
    )
    assert done.exit_code == exit_codes.HOST_FAILED
    assert done.messages == [f"host {HOST}: ValueError: No start of json char found"]


def test_a_database_that_fails_at_the_end_says_where_the_results_are(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(store, "connect", broken)  # what bwtune.commands.sweep_command calls
    done = sweep_service.collect(request(), playbook_run({"results": [line("c0000000001", "ok")]}))
    assert done.exit_code == exit_codes.HOST_FAILED and done.output is None
    (message,) = done.messages
    assert f"{HOST}:~/.local/share/bwtune/sweeps/{RUN}/results.jsonl" in message
    assert f"bwtune import FILE --run-id {RUN}" in message


def test_a_home_that_fills_during_the_run_is_one_storage_line_and_the_cancel_still_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # BWTUNE_HOME filled while the playbook ran: the CLI hung, or died with ansible-runner's
    # ENOSPC traceback, and Ctrl-C's cancel playbook failed the same way (issue 21 #10).
    full = ansible_run.ArtifactWriteError(28, f"cannot write {tmp_path}/runner: No space left on device")
    folders: list[Path] = []

    def run_playbook(
        name: str, *args: object, private_data_dir: Path, **kwargs: object
    ) -> ansible_run.PlaybookRun:
        folders.append(Path(private_data_dir))
        if name == sweep_service.SWEEP_PLAYBOOK or len(folders) == 1:
            raise full
        done = ansible_run.PlaybookRun(
            playbook=Path(name), private_data_dir=Path(private_data_dir), ident="x"
        )
        done.stats, done.rc = {"ok": {HOST: 1}}, 0
        return done

    monkeypatch.setattr(ansible_run, "run_playbook", run_playbook)
    monkeypatch.setattr(sweep_service, "read_prior", lambda request: [])
    outcome = sweep.run_sweep(request())
    assert outcome.exit_code == exit_codes.HOST_FAILED
    (message,) = outcome.messages
    assert message.startswith(f"could not store run {RUN} in the results database")
    assert "No space left on device" in message and "\n" not in message
    assert f"{HOST}:~/.local/share/bwtune/sweeps/{RUN}/results.jsonl" in message
    assert f"bwtune sweep --attach {RUN}" in message

    folders.clear()
    stopped = sweep_service.stop_outcome(request(), tmp_path / "full-runner")
    # The cancel ran again outside BWTUNE_HOME, in a private folder removed after.
    assert len(folders) == 2 and folders[0] == tmp_path / "full-runner"
    assert not folders[1].is_relative_to(tmp_path) and not folders[1].exists()
    assert stopped.stopped == [HOST] and stopped.failures == []
