"""What a bisection found: per component its first bad version (or why none), the pairs
that regress only together, every measured step with its objective and 95% interval, and
what it cost (steps, builds, launches) against a linear search.

A linear search walks each bisected component's versions from the good end, one step per
version, until the first bad one (all of them for a component not at fault), after
measuring the two ends: `linear_steps` is that count for the same findings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# A bisection's outcomes.
FOUND = "found"  # every component at fault has its first bad version (or range)
TOGETHER = "needs components together"
NOT_REPRODUCED = "not reproduced"  # the bad stack is not measurably worse than the good
UNDECIDED = "undecided"  # a step the statistics could not decide at the launch cap
NOT_FOUND = "not found"  # no single component nor pair reproduces the regression

# A component's finding.
FIRST_BAD = "first bad"
COULD_BE = "among skipped"  # skipped (untestable) versions sit between last good and first bad
NOT_ALONE = "not alone"  # its bad value alone, the others good, is good-like
UNTESTABLE = "untestable"  # its bad value alone, the others good, cannot be built or launched
STEP_UNDECIDED = "undecided"

BUILT = "(the build's)"  # a follower's value between the ends: whatever its leader's build gives


@dataclass(frozen=True)
class Step:
    number: int
    role: str  # "good end", "bad end", "torch alone", "bisect sglang_commit", "pair torch+flashinfer"
    changes: Mapping[str, Any]  # the components that differ from the good stack, and their values
    verdict: str  # good-like / bad-like / undecided / untestable, or the end's own name
    launches: int = 0
    objective: float | None = None  # mean of the launch means
    ci95: tuple[float, float] | None = None  # its 95% Student-t interval over launch means
    change: float | None = None  # median against the good end's, minus 1
    note: str = ""

    def text(self) -> str:
        what = ", ".join(f"{k}={BUILT if v is None else v}" for k, v in self.changes.items()) or "good stack"
        if self.objective is None:
            return f"step {self.number} {self.role} [{what}]: {self.verdict} {self.note}".rstrip()
        ci = f" [{self.ci95[0]:.4g}, {self.ci95[1]:.4g}]" if self.ci95 else ""
        change = f" {self.change * 100:+.1f}%" if self.change is not None else ""
        return (
            f"step {self.number} {self.role} [{what}]: {self.objective:.4g}{ci}{change}"
            f" over {self.launches} launches: {self.verdict}"
        )


@dataclass(frozen=True)
class Finding:
    component: str
    name: str
    status: str
    held: Mapping[str, Any] = field(default_factory=dict)  # others not at their good value
    last_good: str | None = None
    first_bad: str | None = None
    first_bad_note: str = ""  # the commit's subject, the nightly's date
    could_be: tuple[str, ...] = ()
    undecided_at: str | None = None
    first_bad_index: int | None = None  # in the component's list, the good end being 0
    size: int = 0  # versions in the component's list, both ends included

    def text(self) -> str:
        held = f" (with {', '.join(f'{k}={v}' for k, v in self.held.items())})" if self.held else ""
        if self.status == FIRST_BAD:
            note = f" ({self.first_bad_note})" if self.first_bad_note else ""
            return f"{self.name}{held}: first bad {self.first_bad}{note} (last good {self.last_good})"
        if self.status == COULD_BE:
            among = ", ".join(self.could_be)
            return f"{self.name}{held}: first bad is one of {among} (untestable ones between)"
        if self.status == STEP_UNDECIDED:
            return f"{self.name}{held}: undecided at {self.undecided_at} (more launches did not decide it)"
        return f"{self.name}{held}: {self.status}"


@dataclass(frozen=True)
class BisectReport:
    outcome: str
    findings: tuple[Finding, ...]
    together: tuple[tuple[str, ...], ...]  # component sets that regress only together
    steps: tuple[Step, ...]
    measured_steps: int  # stacks launched and measured
    builds: int  # stacks built (or tried: untestable ones count)
    launches: int
    linear_steps: int
    baseline: str = ""  # the bad end against the good end, in regress's words
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        out = [f"bisect: {self.outcome}" + (f" (bad against good: {self.baseline})" if self.baseline else "")]
        out += [f"  {finding.text()}" for finding in self.findings]
        out += [f"  needs components {' and '.join(group)} together" for group in self.together]
        out += [f"  {step.text()}" for step in self.steps]
        out.append(
            f"  cost: {self.measured_steps} measured steps, {self.builds} builds, {self.launches} launches;"
            f" a linear search: {self.linear_steps} steps"
        )
        out += [f"  warning: {w}" for w in self.warnings]
        return out
