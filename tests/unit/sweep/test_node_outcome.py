"""A node's sweep outcome has one declaration (issue 22): module_utils/_contracts/node_outcome. The
sweep that builds it, the sweep_progress module that returns it, the sweep_summary filter
and the controller (`bwtune sweep`'s node_results and what reads it) use its builders and
readers; these tests hold every outcome the node returns to the declared keys."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.filter import sweep_summary
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import node_outcome
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner, sweep_state
from ansible_collections.bwtune.sglang.plugins.modules import sweep_progress
from bwtune import progress
from bwtune.ansible_run import RunnerEvent
from tests.unit.sweep.test_resume_lines import fake_launches, options, run

REPO = Path(__file__).resolve().parents[3]


def test_the_declaration_is_consistent() -> None:
    assert node_outcome.problems() == []
    assert node_outcome.always(node_outcome.FINISHED) == ("results", "best", "summary", "error")
    # error is in every outcome: null when the sweep finished, why when it did not.
    assert all("error" in node_outcome.always(end) for end in node_outcome.ENDS)


def test_a_finished_sweep_returns_the_declared_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_launches(monkeypatch)
    outcome = run(options(tmp_path))
    assert tuple(outcome) == node_outcome.always(node_outcome.FINISHED)
    assert outcome["error"] is None and node_outcome.best(outcome) is not None
    summary = node_outcome.summary_of(outcome)
    assert tuple(summary) == tuple(n for n in node_outcome.SUMMARY_NAMES if n != "not_reached")
    # What the progress file keeps as its result is the same outcome.
    kept = sweep_state.read_progress(options(tmp_path).results_path) or {}
    assert json.loads(json.dumps(outcome)) == kept["result"]


def test_a_stopped_sweep_says_which_launches_it_did_not_reach(tmp_path, monkeypatch) -> None:
    fake_launches(monkeypatch, stop_after=1)
    outcome = run(options(tmp_path))
    assert tuple(outcome) == node_outcome.always(node_outcome.FINISHED)
    assert node_outcome.error(outcome) and "not_reached" in outcome["summary"]
    assert "left_out" not in outcome["summary"]


def test_a_summary_takes_declared_keys_only() -> None:
    values = {name: None for name in node_outcome.SUMMARY_NAMES if name not in node_outcome.UNLAUNCHED}
    assert tuple(node_outcome.make_summary(**values, left_out=[]))[-1] == "left_out"
    with pytest.raises(KeyError, match="unknown \\['lanches'\\]"):
        node_outcome.make_summary(**values, left_out=[], lanches=1)
    with pytest.raises(KeyError, match="missing \\['run_id'\\]"):
        node_outcome.make_summary(**{k: v for k, v in values.items() if k != "run_id"}, left_out=[])
    with pytest.raises(KeyError, match="needs one of"):
        node_outcome.make_summary(**values, left_out=[], not_reached=[])


def test_the_failure_outcomes_carry_their_always_keys() -> None:
    assert tuple(node_outcome.failed("boom")) == node_outcome.always(node_outcome.FAILED)
    assert node_outcome.failed("boom", [{"a": 1}])["results"] == [{"a": 1}]
    died = node_outcome.died("gone", [], None)
    assert set(node_outcome.always(node_outcome.DIED)) <= set(died) <= set(node_outcome.NAMES)
    timed_out = node_outcome.timed_out("late", [], None)
    assert set(node_outcome.always(node_outcome.TIMED_OUT)) <= set(timed_out) <= set(node_outcome.NAMES)
    assert set(node_outcome.partial([])) <= set(node_outcome.NAMES)


def test_the_module_returns_a_declared_outcome_for_each_end(tmp_path: Path) -> None:
    results = tmp_path / "r1" / "results.jsonl"
    results.parent.mkdir()
    params: dict[str, Any] = {"results_path": str(results), "async_dir": str(tmp_path), "async_s": 60}

    def look(job: dict[str, Any]) -> dict[str, Any]:
        (tmp_path / "j1.1").write_text(json.dumps(job))
        finished, _view, result = sweep_progress._look({**params, "job_id": "j1.1"})
        assert finished and result is not None
        assert set(result) <= set(node_outcome.NAMES)
        return result

    ended = look({"results": [], "best": None, "summary": {"run_id": "r1"}, "error": None, "changed": True})
    assert tuple(ended) == node_outcome.always(node_outcome.FINISHED)
    failed = look({"failed": True, "msg": "bad matrix"})
    assert failed == {"error": "bad matrix"}
    late = look({"failed": True, "msg": "Timeout exceeded", "child_pid": 1})
    assert set(node_outcome.always(node_outcome.TIMED_OUT)) <= set(late)
    vanished = look({"failed": True, "msg": "module vanished", "data": ""})
    assert set(node_outcome.always(node_outcome.DIED)) <= set(vanished)


def test_a_dead_sweep_from_its_progress_file_is_a_declared_outcome(tmp_path: Path) -> None:
    results = tmp_path / "r1" / "results.jsonl"
    results.parent.mkdir()
    writer = sweep_state.Progress(str(results), "r1", 2)
    writer.data["pid"] = 2**22 + 12345  # no such process: the sweep died
    writer.save()
    params = {"results_path": str(results), "async_dir": str(tmp_path), "job_id": None, "async_s": None}
    finished, _view, result = sweep_progress._look(params)
    assert finished and set(node_outcome.always(node_outcome.DIED)) <= set(result or {})


def test_the_filter_and_the_live_view_read_a_finished_outcome(tmp_path, monkeypatch) -> None:
    fake_launches(monkeypatch)
    outcome = run(options(tmp_path))
    shown = sweep_summary.sweep_summary(outcome)
    assert shown["failed"] == "" and any(line.startswith("best: ") for line in shown["lines"])
    state = progress.SweepState.for_hosts({"h1": False})
    res = {"finished": True, "progress": {}, "result": outcome}
    state.update(RunnerEvent("ok", "h1", progress.FOLLOW_TASK, "bwtune.sglang.sweep_progress", res, {}))
    launched = [
        line for line in outcome["results"] if sweep_runner.results_contract.is_launched(line["status"])
    ]
    assert state.hosts["h1"].done == len(launched) and state.hosts["h1"].failure is None


READERS = (
    "plugins/filter/sweep_summary.py",
    "plugins/modules/sweep_progress.py",
    "plugins/modules/sweep.py",
    "src/bwtune/progress.py",
    "src/bwtune/commands/sweep_command.py",
    "src/bwtune/app/sweep_service.py",
    "src/bwtune/app/sweep_collect.py",
    "src/bwtune/app/sweep_stop.py",
    "src/bwtune/app/sweep_inputs.py",
    "src/bwtune/app/sweep_prior.py",
)


@pytest.mark.parametrize("path", READERS)
def test_no_reader_spells_out_an_outcome_key(path: str) -> None:
    """The outcome's keys are read through node_outcome, never as `x.get("results")` of a
    node's result: a key renamed in the declaration cannot leave a reader behind."""
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    spelled = [
        f"{path}:{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("result", "outcome", "res_result")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in ("results", "best", "summary", "error")
    ]
    assert spelled == []


def test_the_controller_reads_the_unlaunched_configs_of_each_summary() -> None:
    from bwtune.app import sweep_service

    assert sweep_service.unlaunched({"h": {"summary": {"left_out": [{"config": "c1"}]}}}) == {
        "left_out": [{"id": "c1", "host": "h", "point": {}}],
        "not_reached": [],
    }


@pytest.mark.parametrize("path", ["roles/sweep/tasks/outcome.yml", "playbooks/sweep_attach.yml"])
def test_the_role_and_the_attach_playbook_read_declared_keys_only(path: str) -> None:
    """Ansible reads the outcome by key (it cannot import the declaration): each key it reads
    of `__sweep_progress.result` is one node_outcome declares."""
    text = (REPO / path).read_text(encoding="utf-8")
    read = set(re.findall(r"__sweep_progress\.result\.(\w+)", text))
    assert read and read <= set(node_outcome.NAMES)
