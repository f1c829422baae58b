"""The engine over one component (SGLang commits, first-parent order): a planted change among
64 commits found in at most ceil(log2(64)) + 2 measured steps (the two ends included), a
broken build skipped to a neighbour, a noisy step given more launches, a level between the
ends reported undecided, and a bad stack that is not worse reported as not reproduced.

Two interacting changes: neither component's bad value regresses alone, both together do.
The report says "needs components torch and flashinfer together", and each one's first bad
version with the other at its bad value; an unrelated third component is cleared."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bwtune.bisect import findings as rep
from bwtune.bisect.bisection import Bisection, Settings
from bwtune.bisect.component_ranges import make_plan
from bwtune.bisect.log import stack_key
from bwtune.bisect.verdict import GOOD_LIKE, UNDECIDED, judge
from tests.unit.bisect.simulated import COMMITS, FLASHINFER, GOOD, NIGHTLIES, World, commit_change, stack

BAD = stack(sglang_commit="c63", sglang="0.5.24")


def bisect(world: World, run_dir: Path, settings: Settings | None = None) -> rep.BisectReport:
    plan = make_plan(GOOD, BAD, {"sglang_commit": COMMITS})
    return Bisection(plan, world.measure, str(run_dir), settings).run()


@pytest.mark.parametrize("at", [1, 2, 21, 32, 40, 62, 63])
def test_a_planted_change_among_64_commits(tmp_path: Path, at: int) -> None:
    world = World(commit_change(at))
    report = bisect(world, tmp_path)
    assert report.outcome == rep.FOUND
    (finding,) = report.findings
    assert (finding.status, finding.first_bad, finding.last_good) == (
        rep.FIRST_BAD,
        COMMITS[at],
        COMMITS[at - 1],
    )
    assert report.measured_steps <= math.ceil(math.log2(64)) + 2
    # Each stack built once; a later call for it only adds launches, never the same ones again.
    assert len({key for key, _n in world.calls}) == report.builds
    assert len(world.taken) == len(set(world.taken)) == report.launches
    assert report.linear_steps == 2 + at
    assert "first bad " + COMMITS[at] in "\n".join(report.lines())


def test_every_step_reports_its_objective_with_an_interval(tmp_path: Path) -> None:
    report = bisect(World(commit_change(40)), tmp_path)
    for step in report.steps:
        assert step.launches == 3
        assert step.ci95 is not None and step.objective is not None
        assert step.ci95[0] < step.objective < step.ci95[1]
        slow = COMMITS.index(step.changes.get("sglang_commit", "c00")) >= 40
        assert (step.objective < 90) == slow
    assert [s.verdict for s in report.steps[:2]] == ["good", "bad"]
    assert json.loads(json.dumps(report.to_dict()))["findings"][0]["first_bad"] == "c40"  # JSON as it is


def test_a_broken_build_in_the_middle_is_skipped(tmp_path: Path) -> None:
    def broken(s: object) -> str | None:
        return "sgl-kernel: nvcc exited 1" if s["sglang_commit"] in ("c31", "c30") else None  # type: ignore[index]

    world = World(commit_change(40), broken=broken)
    report = bisect(world, tmp_path)
    (finding,) = report.findings
    assert (finding.status, finding.first_bad) == (rep.FIRST_BAD, "c40")
    untestable = [s for s in report.steps if s.verdict == "untestable"]
    assert [s.changes["sglang_commit"] for s in untestable] == [
        "c31",
        "c30",
    ]  # the midpoint, then its neighbour
    assert all("nvcc exited 1" in s.note for s in untestable)
    assert sorted(world.tried.values()) == [1, 1]  # each tried once
    assert report.builds == report.measured_steps + 2


def test_a_broken_build_next_to_the_change_leaves_the_candidates(tmp_path: Path) -> None:
    world = World(
        commit_change(40), broken=lambda s: "import failed" if s["sglang_commit"] == "c40" else None
    )
    report = bisect(world, tmp_path)
    (finding,) = report.findings
    assert finding.status == rep.COULD_BE
    assert finding.could_be == ("c40", "c41")
    assert report.outcome == rep.FOUND


def test_a_noisy_step_gets_more_launches(tmp_path: Path) -> None:
    # The first midpoint (c31, good) spreads 7% launch to launch against a 10% regression.
    noisy = "c31"
    world = World(
        commit_change(40, slow=0.9), spread_of=lambda s: 0.07 if s["sglang_commit"] == noisy else 0.0
    )
    report = bisect(world, tmp_path)
    (finding,) = report.findings
    assert finding.first_bad == "c40"
    steps = {s.changes.get("sglang_commit", "c00"): s for s in report.steps}
    assert 3 < steps[noisy].launches <= 9
    assert steps[noisy].verdict == GOOD_LIKE
    assert all(s.launches == 3 for commit, s in steps.items() if commit != noisy)
    # Three launches could not decide it (the log holds what was measured); all of them did.
    by_stack: dict[str, list[list[float]]] = {}
    for line in (tmp_path / "bisect.jsonl").read_text().splitlines()[1:]:
        record = json.loads(line)
        by_stack.setdefault(stack_key(record["stack"]), []).extend(record["launches"])
    plan = make_plan(GOOD, BAD, {"sglang_commit": COMMITS})
    good, bad = by_stack[stack_key(plan.good)], by_stack[stack_key(plan.bad)]
    step = by_stack[stack_key(plan.stack({"sglang_commit": noisy}))]
    assert judge(good, bad, step[:3], metric="output_throughput", goal="max").verdict == UNDECIDED
    assert judge(good, bad, step, metric="output_throughput", goal="max").verdict == GOOD_LIKE
    assert len(world.taken) == len(set(world.taken))  # more launches, never the same ones again


def test_a_step_between_the_ends_is_reported_undecided_not_guessed(tmp_path: Path) -> None:
    def level(s: object) -> float:
        index = COMMITS.index(s["sglang_commit"]) if s["sglang_commit"] in COMMITS else 0  # type: ignore[index]
        return 100.0 if index < 20 else 90.0 if index < 40 else 80.0

    settings = Settings(max_launches=7)
    report = bisect(World(level), tmp_path, settings)
    (finding,) = report.findings
    assert finding.status == rep.STEP_UNDECIDED
    assert finding.undecided_at == "c31"
    assert finding.first_bad is None
    assert report.outcome == rep.UNDECIDED
    (step,) = [s for s in report.steps if s.verdict == "undecided"]
    assert step.launches == 7


def test_a_bad_stack_no_worse_is_not_reproduced(tmp_path: Path) -> None:
    world = World(lambda s: 100.0)
    report = bisect(world, tmp_path, Settings(max_launches=5))
    assert report.outcome == rep.NOT_REPRODUCED
    assert report.findings == ()
    assert {key for key, _n in world.calls} == {
        stack_key(make_plan(GOOD, BAD).good),
        stack_key(make_plan(GOOD, BAD).bad),
    }


# Two interacting changes (torch and flashinfer).
TORCH_AT, FLASHINFER_AT = 5, 2  # the nightly and the release from which the pair is slow


def pair_level(s: Mapping[str, Any]) -> float:
    torch_bad = s["torch"] in NIGHTLIES and NIGHTLIES.index(s["torch"]) >= TORCH_AT
    flashinfer_bad = s["flashinfer"] in FLASHINFER and FLASHINFER.index(s["flashinfer"]) >= FLASHINFER_AT
    return 80.0 if torch_bad and flashinfer_bad else 100.0


PAIR_BAD = stack(torch=NIGHTLIES[-1], sglang_commit=COMMITS[15], flashinfer=FLASHINFER[-1])
PAIR_CANDIDATES = {"torch": NIGHTLIES, "sglang_commit": COMMITS[:16], "flashinfer": FLASHINFER}


def test_two_interacting_changes_are_reported_together(tmp_path: Path) -> None:
    plan = make_plan(GOOD, PAIR_BAD, PAIR_CANDIDATES)
    report = Bisection(plan, World(pair_level).measure, str(tmp_path)).run()
    assert report.outcome == rep.TOGETHER
    assert report.together == (("torch", "flashinfer"),)
    alone = {f.component: f.status for f in report.findings if not f.held}
    assert alone == {"torch": rep.NOT_ALONE, "sglang_commit": rep.NOT_ALONE, "flashinfer": rep.NOT_ALONE}
    paired = {f.component: f for f in report.findings if f.held}
    assert paired["torch"].first_bad == NIGHTLIES[TORCH_AT]
    assert paired["torch"].held == {"flashinfer": FLASHINFER[-1]}
    assert paired["flashinfer"].first_bad == FLASHINFER[FLASHINFER_AT]
    assert "  needs components torch and flashinfer together" in report.lines()
    roles = [s.role for s in report.steps]
    assert "torch+flashinfer together" in roles


def test_a_single_component_found_alone_needs_no_pair(tmp_path: Path) -> None:
    def torch_only(s: Mapping[str, Any]) -> float:
        return 80.0 if s["torch"] in NIGHTLIES and NIGHTLIES.index(s["torch"]) >= TORCH_AT else 100.0

    plan = make_plan(GOOD, PAIR_BAD, PAIR_CANDIDATES)
    report = Bisection(plan, World(torch_only).measure, str(tmp_path)).run()
    assert report.outcome == rep.FOUND
    assert report.together == ()
    found = {f.component: f for f in report.findings}
    assert found["torch"].first_bad == NIGHTLIES[TORCH_AT]
    assert found["flashinfer"].status == found["sglang_commit"].status == rep.NOT_ALONE
    assert not any("together" in s.role for s in report.steps)
