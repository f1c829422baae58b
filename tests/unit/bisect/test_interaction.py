"""Two interacting changes: neither component's bad value regresses alone, both together do.
The report says "needs components torch and flashinfer together", and each one's first bad
version with the other at its bad value; an unrelated third component is cleared."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bwtune.bisect import report as rep
from bwtune.bisect.engine import Bisection
from bwtune.bisect.plan import make_plan
from tests.unit.bisect.simulated import COMMITS, FLASHINFER, GOOD, NIGHTLIES, World, stack

TORCH_AT, FLASHINFER_AT = 5, 2  # the nightly and the release from which the pair is slow


def level(s: Mapping[str, Any]) -> float:
    torch_bad = s["torch"] in NIGHTLIES and NIGHTLIES.index(s["torch"]) >= TORCH_AT
    flashinfer_bad = s["flashinfer"] in FLASHINFER and FLASHINFER.index(s["flashinfer"]) >= FLASHINFER_AT
    return 80.0 if torch_bad and flashinfer_bad else 100.0


BAD = stack(torch=NIGHTLIES[-1], sglang_commit=COMMITS[15], flashinfer=FLASHINFER[-1])
CANDIDATES = {"torch": NIGHTLIES, "sglang_commit": COMMITS[:16], "flashinfer": FLASHINFER}


def test_two_interacting_changes_are_reported_together(tmp_path: Path) -> None:
    report = Bisection(make_plan(GOOD, BAD, CANDIDATES), World(level).measure, str(tmp_path)).run()
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

    report = Bisection(make_plan(GOOD, BAD, CANDIDATES), World(torch_only).measure, str(tmp_path)).run()
    assert report.outcome == rep.FOUND
    assert report.together == ()
    found = {f.component: f for f in report.findings}
    assert found["torch"].first_bad == NIGHTLIES[TORCH_AT]
    assert found["flashinfer"].status == found["sglang_commit"].status == rep.NOT_ALONE
    assert not any("together" in s.role for s in report.steps)
