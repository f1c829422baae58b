"""How the wrapper reads ansible-runner's events and Ansible's error output."""

from __future__ import annotations

from pathlib import Path

from bwtune import ansible_run
from bwtune.ansible_run import events as run_events
from bwtune.ansible_run import inventory as run_inventory


def raw(event: str, host: str | None = None, **data: object) -> dict:
    return {"event": event, "uuid": "u", "counter": 1, "event_data": {"host": host, **data}}


def feed(*events: dict) -> ansible_run.PlaybookRun:
    outcome = ansible_run.PlaybookRun(
        playbook=Path("p.yml"), private_data_dir=Path("/nonexistent"), ident="x"
    )
    for event in events:
        reduced = run_events.reduce(event)
        if reduced is not None:
            run_events.record(outcome, reduced)
    return outcome


def test_results_are_per_host_by_module_and_task() -> None:
    outcome = feed(
        raw("verbose"),
        raw(
            "runner_on_ok",
            "a",
            task="Follow the sweep",
            resolved_action="bwtune.sglang.sweep_progress",
            res={"finished": False},
        ),
        raw(
            "runner_on_ok",
            "a",
            task="Follow the sweep",
            resolved_action="bwtune.sglang.sweep_progress",
            res={"finished": True, "result": {"results": [1]}},
        ),
        raw("runner_on_ok", "b", task="Other", task_action="bwtune.sglang.sweep_progress", res={"x": 1}),
        raw("runner_on_ok", "b", task="Other", resolved_action="other.coll.sweep_progress", res={"y": 2}),
    )
    assert outcome.results("bwtune.sglang.sweep_progress", task="Follow the sweep") == {
        "a": {"finished": True, "result": {"results": [1]}}
    }
    assert outcome.results("bwtune.sglang.sweep_progress") == {"a": outcome.ok[1].res, "b": {"x": 1}}
    # A short name matches any collection's module of that name; the last ok wins.
    assert outcome.results("sweep_progress")["b"] == {"y": 2}


def test_first_failure_per_host_is_kept_and_ignored_errors_are_not_failures() -> None:
    outcome = feed(
        raw("runner_on_failed", "a", task="Probe", res={"msg": "ignored"}, ignore_errors=True),
        raw("runner_on_unreachable", "b", task="Start", res={"msg": "Failed to connect\n  to the host"}),
        raw("runner_on_failed", "b", task="Later", res={"msg": "second"}),
        raw("runner_on_failed", "c", task="Run", res={"stderr": "x" * 400}),
        raw(
            "playbook_on_stats",
            None,
            ok={"a": 2},
            dark={"b": 1},
            failures={"c": 1},
            artifact_data={"bwtune_sweep": {"a": {}}},
        ),
    )
    assert sorted(outcome.failures) == ["b", "c"]
    assert (
        outcome.failures["b"].line() == "host b is unreachable in task 'Start': Failed to connect to the host"
    )
    # A long message is cut to its start and its end (where a command's output names the cause).
    long = outcome.failures["c"].message
    assert len(long) <= 300 and long.startswith("x" * 90 + " [...] x") and long.endswith("x")
    assert outcome.hosts == ["a", "b", "c"]
    assert outcome.artifact_data == {"bwtune_sweep": {"a": {}}}


def test_inventory_errors_pick_the_parser_for_the_file_type() -> None:
    stderr = (
        "[WARNING]: Failed to parse inventory with 'yaml' plugin: YAML parsing failed: bad indent.\n"
        "[WARNING]: Failed to parse inventory with 'ini' plugin: Invalid host pattern 'all:' supplied\n"
        "[ERROR]: No inventory was parsed, please check your configuration and options.\n"
    )
    assert (
        run_inventory.inventory_reason(stderr, Path("h.yml"))
        == "cannot be parsed as yaml: YAML parsing failed: bad indent."
    )
    assert run_inventory.inventory_reason(stderr, Path("hosts")) == (
        "cannot be parsed as ini: Invalid host pattern 'all:' supplied"
    )
    only_error = "[ERROR]: Completely failed to parse inventory source /x\n"
    assert (
        run_inventory.inventory_reason(only_error, Path("/x"))
        == "Completely failed to parse inventory source /x"
    )


def test_first_error_of_a_playbook_that_did_not_start() -> None:
    lines = [
        "PLAY [x] ****",
        "[ERROR]: couldn't resolve module/action 'bwtune.sglang.nope'.",
        "Origin: /p/sweep.yml:40:7",
        "",
    ]
    assert run_events.first_error(lines) == (
        "couldn't resolve module/action 'bwtune.sglang.nope'. (Origin: /p/sweep.yml:40:7)"
    )
    assert (
        run_events.first_error(["ERROR! the playbook: x could not be found"])
        == "the playbook: x could not be found"
    )
    assert run_events.first_error(["all fine"]) is None


def test_run_ids_sort_by_time_and_differ() -> None:
    ids = {ansible_run.new_run_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(len(i) == len("20260101T000000Z-0123abcd") and i[8] == "T" for i in ids)
