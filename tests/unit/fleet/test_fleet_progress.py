"""A fleet sweep's progress per host (issue 25): each host's line and live row say its
launches done, running, queued and failed; the outcome's lines say each host's part and
what was reassigned."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from bwtune.ansible_run import RunnerEvent
from bwtune.commands._sweep_output import fleet_lines
from bwtune.progress import FOLLOW_TASK, SweepState


def retry(host: str, done: int, failed: int, current: dict[str, Any] | None) -> RunnerEvent:
    res = {"progress": {"planned": 3, "done": done, "failed": failed, "current": current, "eta_s": None}}
    return RunnerEvent("retry", host, FOLLOW_TASK, "bwtune.sglang.sweep_progress", res, {"host": host})


def test_a_fleet_hosts_line_says_running_and_queued() -> None:
    state = SweepState.for_hosts({"a": True, "b": True})
    state.fleet = True
    line = state.update(retry("a", 1, 0, {"config": "c1", "phase": "gate"}))
    assert line == "a:  1/3 done  0 failed  1 running  1 queued  c1 gate  (simulated)"
    line = state.update(retry("b", 2, 1, None))
    assert line == "b:  2/3 done  1 failed  0 running  1 queued  waiting  (simulated)"
    out = io.StringIO()
    Console(file=out, width=120).print(state.table("fleet"))
    assert "queued" in out.getvalue()
    row_a = next(row for row in out.getvalue().splitlines() if row.startswith("┃ a") or "│ a " in row)
    assert "1/3" in row_a and "c1 gate" in row_a


def test_a_single_hosts_line_is_as_before() -> None:
    state = SweepState.for_hosts({"a": False})
    assert state.update(retry("a", 1, 0, None)) == "a:  1/3 done  0 failed  waiting"


def test_the_outcome_lines_say_each_hosts_part_and_the_reassignments() -> None:
    fleet = {
        "groups": [{"key": "sm120|8 x GPU|pcie|stack f", "hosts": ["a", "b"], "launches": 4, "lost": ["b"]}],
        "hosts": [
            {"group": "sm120|8 x GPU|pcie|stack f", "host": "a", "assigned": 3, "done": 3, "failed": 1,
             "queued": 0, "lost": False},
            {"group": "sm120|8 x GPU|pcie|stack f", "host": "b", "assigned": 1, "done": 1, "failed": 0,
             "queued": 0, "lost": True},
        ],
        "rounds": 2,
        "reassigned": [{"round": 1, "host": "b", "why": "killed", "to": {"a": ["c3"]}}],
    }  # fmt: skip
    assert fleet_lines(fleet) == [
        "fleet: 2 hosts in 1 hardware group(s), 2 round(s)",
        "  a: 3 assigned, 3 done, 1 failed, 0 queued",
        "  b: 1 assigned, 1 done, 0 failed, 0 queued, lost: its unfinished launches were reassigned",
        "reassigned after round 1: from b: c3 to a",
    ]
    assert fleet_lines(None) == []
