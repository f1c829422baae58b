"""The progress state and both views, fed the events a sweep playbook produces."""

from __future__ import annotations

import io
from typing import Any

from bwtune.ansible_run import RunnerEvent
from bwtune.progress import FOLLOW_TASK, ProgressView, SweepState, TaskLines, format_duration

FOLLOW = "bwtune.sglang.sweep_progress"


def event(kind: str, host: str | None, res: dict[str, Any] | None = None, **extra: Any) -> RunnerEvent:
    task = extra.pop("task", FOLLOW_TASK)
    action = extra.pop("action", FOLLOW)
    return RunnerEvent(kind, host, task, action, res or {}, {"host": host, **extra})


def progress(
    done: int, failed: int = 0, current: dict[str, Any] | None = None, eta: float | None = 90
) -> dict:
    return {"progress": {"planned": 6, "done": done, "failed": failed, "current": current, "eta_s": eta}}


def test_retries_move_each_host_and_report_changes_only() -> None:
    state = SweepState.for_hosts({"gpu1": False, "gpu2": True})
    current = {"config": "c0123456789", "phase": "workload", "workload": 2, "workloads": 3}
    line = state.update(event("retry", "gpu1", progress(1, current=current)))
    assert line == "gpu1:  1/6 done  0 failed  c0123456789 workload 2/3  ETA 1m30s"
    assert state.update(event("retry", "gpu1", progress(1, current=current))) is None
    line = state.update(event("retry", "gpu2", progress(2, 1, {"config": "c1", "phase": "gate"}, None)))
    assert line == "gpu2:  2/6 done  1 failed  c1 gate  (simulated)"
    assert (state.hosts["gpu1"].done, state.hosts["gpu2"].failed) == (1, 1)


def test_the_final_ok_finishes_the_host_and_counts_its_results() -> None:
    state = SweepState.for_hosts({"gpu1": False})
    state.update(event("retry", "gpu1", progress(5, current={"config": "c9", "phase": "stopping"})))
    lines = [{"status": "ok", "simulated": True}] * 5 + [{"status": "oom", "simulated": True}]
    lines += [{"status": "pruned", "simulated": True}, {"status": "duplicate", "simulated": True}]
    line = state.update(event("ok", "gpu1", {**progress(6, 1, None, 0), "result": {"results": lines}}))
    assert line == "gpu1:  6/6 done  1 failed  finished  (simulated)"
    assert state.hosts["gpu1"].finished and state.hosts["gpu1"].current is None


def test_failures_and_unreachable_hosts_are_shown_with_their_reason() -> None:
    state = SweepState.for_hosts({"a": False, "b": False})
    line = state.update(
        event("unreachable", "a", {"msg": "ssh: connect to host 10.0.0.9 port 22: refused\nmore"})
    )
    assert line == "a: unreachable: ssh: connect to host 10.0.0.9 port 22: refused"
    line = state.update(
        event("failed", "b", {"msg": "boom"}, task="Start the sweep", action="bwtune.sglang.sweep")
    )
    assert line == "b: failed: boom"
    assert state.update(event("failed", "b", {"msg": "ignored"}, ignore_errors=True)) is None
    assert state.hosts["b"].failure == "failed: boom"


def test_other_tasks_set_the_waiting_text_until_the_sweep_reports() -> None:
    state = SweepState.for_hosts({"a": False})
    state.update(event("task_start", None, task="Start the sweep", action="bwtune.sglang.sweep"))
    assert state.hosts["a"].phase_text() == "Start the sweep"
    assert state.update(event("ok", "a", {"changed": True}, task="Start the sweep", action="sweep")) is None


def test_plain_view_prints_one_line_per_change_and_quiet_prints_nothing() -> None:
    stream = io.StringIO()
    state = SweepState.for_hosts({"a": False})
    with ProgressView(state, "title", stream=stream) as view:
        view.on_event(event("retry", "a", progress(1)))
        view.on_event(event("retry", "a", progress(1)))
        view.on_event(event("retry", "a", progress(2)))
        view.note("cancelling")
    assert stream.getvalue().splitlines() == [
        "title",
        "a:  1/6 done  0 failed  waiting  ETA 1m30s",
        "a:  2/6 done  0 failed  waiting  ETA 1m30s",
        "cancelling",
    ]
    quiet = io.StringIO()
    with ProgressView(SweepState.for_hosts({"a": False}), "title", stream=quiet, quiet=True) as view:
        view.on_event(event("retry", "a", progress(1)))
    assert quiet.getvalue() == ""


def test_live_view_draws_a_table_with_every_host() -> None:
    stream = io.StringIO()
    state = SweepState.for_hosts({"node-a": False, "node-b": True})
    with ProgressView(state, "sweeping", stream=stream, live=True) as view:
        view.on_event(event("retry", "node-a", progress(3, 1, {"config": "cabc", "phase": "starting"})))
    text = stream.getvalue()
    for expected in ("sweeping", "node-a", "node-b", "3/6", "cabc starting", "1m30s", "simulated", "Ctrl-C"):
        assert expected in text


def test_task_lines_for_short_playbooks() -> None:
    stream = io.StringIO()
    lines = TaskLines(stream=stream)
    lines.on_event(event("ok", "a", {"changed": False}, task="Gather GPU facts", action="gpu_facts"))
    lines.on_event(event("ok", "a", {"changed": True}, task="Install", action="pip"))
    lines.on_event(event("failed", "b", {"msg": "no GPU\nsecond line"}, task="Gather GPU facts"))
    lines.on_event(event("retry", "a", {}, task="x"))
    assert stream.getvalue().splitlines() == [
        "a: Gather GPU facts: ok",
        "a: Install: changed",
        "b: Gather GPU facts: failed: no GPU",
    ]


def test_task_lines_show_a_modules_warnings_even_when_quiet() -> None:
    # A risk the user accepted (preflight_accept_glibc_risk) is a module warning: it must
    # reach the user of `bwtune provision`, whose playbook output is not shown.
    warning = "glibc: 2.41 is >= 2.41, accepted by preflight_accept_glibc_risk: FlashInfer kernels\nmay fail"
    for quiet, progress_line in ((False, ["a: Check glibc: ok"]), (True, [])):
        stream = io.StringIO()
        lines = TaskLines(stream=stream, quiet=quiet)
        lines.on_event(event("ok", "a", {"changed": False, "warnings": [warning]}, task="Check glibc"))
        lines.on_event(event("skipped", "b", {"warnings": ["not shown: a skipped task"]}, task="x"))
        assert stream.getvalue().splitlines() == [
            *progress_line,
            "a: Check glibc: warning: glibc: 2.41 is >= 2.41, accepted by preflight_accept_glibc_risk: "
            "FlashInfer kernels may fail",
        ]


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0, 59.4, 60, 3599, 3600, 7322, -5)] == [
        "0s",
        "59s",
        "1m00s",
        "59m59s",
        "1h00m",
        "2h02m",
        "0s",
    ]
