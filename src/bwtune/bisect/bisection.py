"""The bisection's driver: measures the two ends, then each component alone, bisects the
ones whose bad value alone regresses, and checks pairs when none does alone.

Every component is bisected holding the others at their good value (issue 28). A step is
one stack: measured with `first_launches` launches, and `more_launches` at a time more
while the statistics cannot decide, up to `max_launches`; then it is reported undecided.
A stack is never measured twice: the ends, a component's bad value alone and a pair are
shared when they are the same stack, and every measurement is in the run folder's log
(bwtune.bisect.log), which a new Bisection replays before measuring anything.

The measure function builds the stack it is given and launches it: `measure(stack, n)`
returns `Measured` (n launches, each its repetitions' objective values) or `Untestable`
(the build, the import or the launch failed), which the search skips like `git bisect
skip`. Building and launching are not built yet: tests give a simulated one.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import regression
from bwtune.bisect import findings as rep
from bwtune.bisect.component_ranges import BisectError, BisectPlan, ComponentRange
from bwtune.bisect.log import LAUNCHES, UNTESTABLE, BisectLog, stack_key
from bwtune.bisect.search import BAD, GOOD, SKIP, ComponentSearch
from bwtune.bisect.verdict import BAD_LIKE, GOOD_LIKE, UNDECIDED, judge, reproduced

STAGES = ("build", "import", "launch")
STEP_UNTESTABLE = "untestable"


@dataclass(frozen=True)
class Measured:
    launches: Sequence[Sequence[float]]  # one entry per launch: its repetitions' values


@dataclass(frozen=True)
class Untestable:
    stage: str  # build, import or launch
    reason: str


Measure = Callable[[Mapping[str, Any], int], Measured | Untestable]


@dataclass(frozen=True)
class Settings:
    metric: str = "output_throughput"
    goal: str = "max"
    first_launches: int = 3
    more_launches: int = 2
    max_launches: int = 9
    stats: regression.Settings = regression.DEFAULT_SETTINGS

    def check(self) -> None:
        if self.goal not in ("max", "min"):
            raise BisectError(f"goal {self.goal!r}: max or min")
        if self.first_launches < 2:
            raise BisectError(
                f"first launches {self.first_launches}: at least 2 (the noise is launch to launch)"
            )
        if self.more_launches < 1:
            raise BisectError(f"more launches {self.more_launches}: at least 1")
        if self.max_launches < self.first_launches:
            raise BisectError(
                f"max launches {self.max_launches}: at least the first launches ({self.first_launches})"
            )
        try:
            self.stats.check()
        except ValueError as exc:
            raise BisectError(str(exc)) from None


class Bisection:
    def __init__(
        self,
        plan: BisectPlan,
        measure: Measure,
        run_dir: str | os.PathLike[str],
        settings: Settings | None = None,
    ) -> None:
        self.plan, self.measure = plan, measure
        self.settings = settings or Settings()
        self.settings.check()
        self.log = BisectLog(run_dir, {"plan": plan.to_dict(), "settings": asdict(self.settings)})
        self._launches: dict[str, list[list[float]]] = {}
        self._untestable: dict[str, Untestable] = {}
        for record in self.log.records:
            key = stack_key(record["stack"])
            if record["kind"] == LAUNCHES:
                self._launches.setdefault(key, []).extend(record["launches"])
            elif record["kind"] == UNTESTABLE:
                self._untestable[key] = Untestable(record["stage"], record["reason"])
        self.measure_calls = 0  # calls of `measure` by this object: a resumed one makes only the new ones
        self._steps: dict[str, rep.Step] = {}
        self._good: list[list[float]] = []
        self._bad: list[list[float]] = []
        self._good_key = stack_key(plan.good)
        self._bad_key = stack_key(plan.bad)

    # ------------------------------------------------------------------ measurements

    def _get(self, stack: Mapping[str, Any], total: int) -> list[list[float]] | Untestable:
        """The stack's first `total` launches, measuring only the ones the log lacks."""
        key = stack_key(stack)
        if key in self._untestable:
            return self._untestable[key]
        have = self._launches.setdefault(key, [])
        if len(have) < total:
            wanted = total - len(have)
            self.measure_calls += 1
            got = self.measure(dict(stack), wanted)
            if isinstance(got, Untestable):
                if got.stage not in STAGES:
                    raise BisectError(f"untestable stage {got.stage!r}: one of {', '.join(STAGES)}")
                self.log.untestable(stack, got.stage, got.reason)
                self._untestable[key] = got
                return got
            launches = [[float(v) for v in launch] for launch in got.launches]
            if (
                len(launches) != wanted
                or not all(launches)
                or not all(math.isfinite(v) for launch in launches for v in launch)
            ):
                raise BisectError(
                    f"the measure function gave {len(launches)} launches for {wanted} asked "
                    "(each needs at least one finite value)"
                )
            self.log.launches(stack, launches)
            have.extend(launches)
        return have[:total]

    def _step(
        self,
        stack: Mapping[str, Any],
        role: str,
        verdict: str,
        launches: Sequence[Sequence[float]],
        change: float | None = None,
        note: str = "",
    ) -> None:
        key = stack_key(stack)
        if key in self._steps:  # the same stack asked again under another role: one step
            old = self._steps[key]
            self._steps[key] = rep.Step(**{**asdict(old), "role": f"{old.role}; {role}"})
            return
        means = [statistics.fmean(launch) for launch in launches]
        objective, ci95 = (contract.mean_ci95(means)[:2]) if means else (None, None)
        changes = {k: v for k, v in stack.items() if self.plan.good.get(k) != v}
        self._steps[key] = rep.Step(
            len(self._steps) + 1, role, changes, verdict, len(launches), objective, ci95, change, note
        )

    def _evaluate(self, stack: Mapping[str, Any], role: str) -> str:
        """good-like, bad-like, undecided or untestable, recording the step."""
        key = stack_key(stack)
        if key in (self._good_key, self._bad_key):  # an end is what it is
            self._step(stack, role, "", [])
            return GOOD_LIKE if key == self._good_key else BAD_LIKE
        s = self.settings
        total = s.first_launches
        while True:
            got = self._get(stack, total)
            if isinstance(got, Untestable):
                self._step(stack, role, STEP_UNTESTABLE, [], note=f"({got.stage} failed: {got.reason})")
                return STEP_UNTESTABLE
            verdict = judge(self._good, self._bad, got, metric=s.metric, goal=s.goal, settings=s.stats)
            if verdict.verdict != UNDECIDED or total >= s.max_launches:
                break
            total = min(s.max_launches, total + s.more_launches)
        self._step(stack, role, verdict.verdict, got, verdict.vs_good.change, verdict.reasons())
        return verdict.verdict

    def _ends(self) -> regression.Verdict:
        s = self.settings
        total = s.first_launches
        while True:
            sides = []
            for which, stack in (("good", self.plan.good), ("bad", self.plan.bad)):
                got = self._get(stack, total)
                if isinstance(got, Untestable):
                    raise BisectError(f"the {which} stack is untestable ({got.stage} failed: {got.reason})")
                sides.append(got)
            self._good, self._bad = sides
            verdict = reproduced(self._good, self._bad, metric=s.metric, goal=s.goal, settings=s.stats)
            if verdict.verdict in (regression.REGRESSION, regression.IMPROVEMENT) or total >= s.max_launches:
                return verdict
            total = min(s.max_launches, total + s.more_launches)

    # ------------------------------------------------------------------ the search

    def _bisect(self, component: ComponentRange, held: Mapping[str, str]) -> rep.Finding:
        versions = component.versions
        search = ComponentSearch(len(versions))
        role = f"bisect {component.key}" + "".join(f" with {k}={v}" for k, v in held.items())
        common = {
            "component": component.key,
            "name": component.name,
            "held": dict(held),
            "size": len(versions),
        }
        while (index := search.next()) is not None:
            value = versions[index].value
            verdict = self._evaluate(self.plan.stack({**held, component.key: value}), role)
            if verdict == UNDECIDED:
                return rep.Finding(
                    status=rep.STEP_UNDECIDED,
                    last_good=versions[search.good].value,
                    undecided_at=value,
                    **common,
                )
            search.mark(index, {GOOD_LIKE: GOOD, BAD_LIKE: BAD}.get(verdict, SKIP))
        result = search.result()
        last_good = versions[result.last_good].value
        if result.first_bad is None:
            could_be = tuple(versions[i].value for i in result.could_be)
            return rep.Finding(status=rep.COULD_BE, last_good=last_good, could_be=could_be, **common)
        first = versions[result.first_bad]
        return rep.Finding(
            status=rep.FIRST_BAD,
            last_good=last_good,
            first_bad=first.value,
            first_bad_note=first.note,
            first_bad_index=result.first_bad,
            **common,
        )

    def run(self) -> rep.BisectReport:
        ends = self._ends()
        self._step(self.plan.good, "good end", "good", self._good)
        self._step(self.plan.bad, "bad end", "bad", self._bad, ends.change, ends.text())
        if ends.verdict != regression.REGRESSION:
            return self._report(rep.NOT_REPRODUCED, [], [], ends)
        findings: list[rep.Finding] = []
        alone: dict[str, str] = {}
        for component in self.plan.components:
            verdict = self._evaluate(
                self.plan.stack({component.key: component.bad}), f"{component.key} alone"
            )
            alone[component.key] = verdict
            if verdict == BAD_LIKE:
                findings.append(self._bisect(component, {}))
                continue
            status = {GOOD_LIKE: rep.NOT_ALONE, STEP_UNTESTABLE: rep.UNTESTABLE}.get(
                verdict, rep.STEP_UNDECIDED
            )
            findings.append(
                rep.Finding(
                    component.key,
                    component.name,
                    status,
                    size=len(component.versions),
                    undecided_at=component.bad if status == rep.STEP_UNDECIDED else None,
                )
            )
        together: list[tuple[str, ...]] = []
        if BAD_LIKE not in alone.values():
            for a, b in itertools.combinations(self.plan.components, 2):
                pair = self.plan.stack({a.key: a.bad, b.key: b.bad})
                if self._evaluate(pair, f"{a.key}+{b.key} together") != BAD_LIKE:
                    continue
                together.append((a.key, b.key))
                # Each one's first bad version with the other at its bad value, when alone
                # each was measured good-like (the search's good end is then known).
                if alone[a.key] == alone[b.key] == GOOD_LIKE:
                    findings.append(self._bisect(a, {b.key: b.bad}))
                    findings.append(self._bisect(b, {a.key: a.bad}))
        if together:
            outcome = rep.TOGETHER
        elif any(f.status in (rep.FIRST_BAD, rep.COULD_BE) for f in findings):
            outcome = rep.FOUND
        elif any(f.status == rep.STEP_UNDECIDED for f in findings):
            outcome = rep.UNDECIDED
        else:
            outcome = rep.NOT_FOUND
        return self._report(outcome, findings, together, ends)

    def _report(
        self,
        outcome: str,
        findings: list[rep.Finding],
        together: list[tuple[str, ...]],
        ends: regression.Verdict,
    ) -> rep.BisectReport:
        steps = tuple(self._steps.values())
        linear = 2
        for component in self.plan.components:
            found = next((f for f in findings if f.component == component.key and not f.held), None)
            index = found.first_bad_index if found and found.first_bad_index is not None else None
            linear += index if index is not None else len(component.versions) - 1
        return rep.BisectReport(
            outcome=outcome,
            findings=tuple(findings),
            together=tuple(together),
            steps=steps,
            measured_steps=sum(1 for step in steps if step.launches),
            builds=len(steps),
            launches=sum(step.launches for step in steps),
            linear_steps=linear,
            baseline=ends.text(),
            warnings=tuple(self.log.warnings),
        )
