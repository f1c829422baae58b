"""`bwtune bisect GOOD BAD --measure --local`: a bisection of SGLang commits measured on this
machine with the stand-in (issue 28; docs/bisect.md).

GOOD and BAD are revisions of the SGLang checkout (`--checkout`); the candidates are the
first-parent commits between them, oldest first, each with its subject. The engine
(bwtune.bisect.bisection) runs with the stand-in step runner (bwtune.bisect.step_runner):
every measurement goes to the run folder's log first, so the same command again resumes a
killed bisection from it without building or launching what the log has.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwtune import store
from bwtune.bisect import findings as rep
from bwtune.bisect.bisection import Bisection, Settings
from bwtune.bisect.component_ranges import make_plan
from bwtune.bisect.log import LAUNCHES, UNTESTABLE
from bwtune.bisect.step_runner import COMPONENT, StandinStepRunner, Workload, first_parent_commits


@dataclass
class LocalRequest:
    checkout: Path
    good: str
    bad: str
    server_args: Sequence[str]
    run_dir: Path | None = None
    stack_cache: Path | None = None
    workload: Workload = field(default_factory=Workload)
    settings: Settings = field(default_factory=Settings)
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class LocalOutcome:
    report: rep.BisectReport
    run_dir: Path
    stack_cache: Path
    candidates: int
    logged_before: int  # measurements the log already had (a resumed bisection)
    counts: dict[str, int]
    wall_s: float
    subjects: dict[str, str]

    def first_bad(self) -> list[tuple[str, str]]:
        return [
            (f.first_bad, f.first_bad_note)
            for f in self.report.findings
            if f.status == rep.FIRST_BAD and f.first_bad
        ]

    def lines(self) -> list[str]:
        out = [
            f"bisect {COMPONENT} on the stand-in (SIMULATED): {self.candidates} commits, first-parent, "
            f"run folder {self.run_dir}"
            + (f" (resumed: {self.logged_before} measurements from its log)" if self.logged_before else "")
        ]
        out += self.report.lines()
        for sha, subject in self.first_bad():
            out.append(f"first bad commit: {sha} {subject}")
        linear = self.report.linear_steps
        c = self.counts
        out.append(
            f"spent: {self.report.measured_steps} measured steps, {self.report.builds} stacks tried "
            f"({c['builds']} built by this run, {c['stacks_reused']} found in the cache {self.stack_cache}), "
            f"{self.report.launches} launches in the log ({c['launches']} by this run), {self.wall_s:.1f} s; "
            f"a linear search: {linear} steps, {linear} builds, at least "
            f"{linear * 3} launches"
        )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "measured": True,
            "report": self.report.to_dict(),
            "first_bad": [{"commit": sha, "subject": subject} for sha, subject in self.first_bad()],
            "run_dir": str(self.run_dir),
            "stack_cache": str(self.stack_cache),
            "candidates": self.candidates,
            "logged_before": self.logged_before,
            "this_run": self.counts,
            "wall_s": round(self.wall_s, 3),
        }


def default_run_dir(good: str, bad: str) -> Path:
    return store.bwtune_home() / "bisect" / f"{good[:12]}-{bad[:12]}"


def run_local(request: LocalRequest) -> LocalOutcome:
    """BisectError (one line) for bad input; otherwise the finished bisection."""
    started = time.monotonic()
    good, bad, candidates = first_parent_commits(request.checkout, request.good, request.bad)
    plan = make_plan({COMPONENT: good}, {COMPONENT: bad}, {COMPONENT: candidates})
    run_dir = request.run_dir or default_run_dir(good, bad)
    cache = request.stack_cache or store.bwtune_home() / "bisect" / "stacks"
    runner = StandinStepRunner(
        request.checkout,
        list(request.server_args),
        cache,
        run_dir,
        workload=request.workload,
        env=dict(request.env),
    )
    bisection = Bisection(plan, runner, run_dir, request.settings)
    before = sum(1 for r in bisection.log.records if r.get("kind") in (LAUNCHES, UNTESTABLE))
    report = bisection.run()
    return LocalOutcome(
        report=report,
        run_dir=Path(run_dir),
        stack_cache=Path(cache),
        candidates=len(candidates),
        logged_before=before,
        counts=runner.counts(),
        wall_s=time.monotonic() - started,
        subjects={c.value: c.note for c in candidates},
    )
