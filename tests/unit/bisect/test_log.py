"""A killed bisection resumes from its log: the resumed run measures only what the log
lacks, gives the uninterrupted run's report, and a run over a finished log measures
nothing; a torn last line is dropped; a log of another bisection is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from bwtune.bisect.bisection import Bisection
from bwtune.bisect.component_ranges import BisectError, make_plan
from tests.unit.bisect.simulated import COMMITS, GOOD, Kill, World, commit_change, stack

BAD = stack(sglang_commit="c63", sglang="0.5.24")
PLAN = make_plan(GOOD, BAD, {"sglang_commit": COMMITS})


def broken(s: object) -> str | None:
    return "launch refused: CUDA error" if s["sglang_commit"] == "c47" else None  # type: ignore[index]


@pytest.mark.parametrize("kill_at", [1, 2, 3, 5, 7])
def test_resume_after_a_kill_measures_nothing_twice(tmp_path: Path, kill_at: int) -> None:
    whole = World(commit_change(40), broken=broken)
    expected = Bisection(PLAN, whole.measure, str(tmp_path / "whole")).run()

    world = World(commit_change(40), broken=broken, kill_at=kill_at)
    with pytest.raises(Kill):
        Bisection(PLAN, world.measure, str(tmp_path / "run")).run()
    calls_before = len(world.calls)
    resumed = Bisection(PLAN, world.measure, str(tmp_path / "run"))
    report = resumed.run()
    assert report == expected
    # Every launch taken once over both sessions, and the same ones an uninterrupted run took.
    assert len(world.taken) == len(set(world.taken))
    assert sorted(world.taken) == sorted(whole.taken)
    assert resumed.measure_calls == len(world.calls) - calls_before
    assert sum(world.tried.values()) == sum(whole.tried.values())  # the broken build tried once

    again = Bisection(PLAN, world.measure, str(tmp_path / "run"))
    assert again.run() == expected
    assert again.measure_calls == 0


def test_a_torn_last_line_is_dropped_and_measured_again(tmp_path: Path) -> None:
    world = World(commit_change(40))
    expected = Bisection(PLAN, world.measure, str(tmp_path)).run()
    log = tmp_path / "bisect.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]) + lines[-1][:25])  # killed while writing the last line
    resumed = Bisection(PLAN, World(commit_change(40)).measure, str(tmp_path))
    report = resumed.run()
    assert resumed.measure_calls == 1
    assert report.findings == expected.findings
    assert any("torn last line" in w for w in report.warnings)
    assert log.read_bytes().endswith(b"\n")
    assert Bisection(PLAN, world.measure, str(tmp_path)).log.warnings == []  # the log is whole again


def test_a_log_of_another_bisection_is_refused(tmp_path: Path) -> None:
    Bisection(PLAN, World(commit_change(40)).measure, str(tmp_path)).run()
    other = make_plan(GOOD, stack(sglang_commit="c31", sglang="0.5.24"), {"sglang_commit": COMMITS[:32]})
    with pytest.raises(BisectError, match="the log of another bisection") as caught:
        Bisection(other, World(commit_change(40)).measure, str(tmp_path))
    assert "\n" not in str(caught.value)
