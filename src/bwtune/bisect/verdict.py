"""A step's verdict: is the stack it measured good-like, bad-like or undecided?

Both ends are measured, so a step is compared with each by regression.compare (the
project's noise-aware test: Mann-Whitney U, an effect size and a noise band from the
spread of launch means), the other end's launches sharpening the noise estimate. A step is
good-like when it is no worse than the good end AND better than the bad end, bad-like when
it is worse than the good end AND no better than the bad end. Anything else (too few
launches, inside the noise, or a level between the two ends) is undecided: the engine asks
for more launches, and at its cap reports the step undecided, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from bwtune import regression

GOOD_LIKE, BAD_LIKE, UNDECIDED = "good-like", "bad-like", "undecided"


@dataclass(frozen=True)
class StepVerdict:
    verdict: str
    vs_good: regression.Verdict
    vs_bad: regression.Verdict

    def reasons(self) -> str:
        return f"vs good: {self.vs_good.text()}; vs bad: {self.vs_bad.text()}"

    def text(self) -> str:
        return f"{self.verdict} ({self.reasons()})"


def judge(
    good: regression.Launches,
    bad: regression.Launches,
    step: regression.Launches,
    *,
    metric: str,
    goal: str,
    settings: regression.Settings = regression.DEFAULT_SETTINGS,
) -> StepVerdict:
    vs_good = regression.compare(good, step, metric=metric, goal=goal, settings=settings, history=[bad])
    vs_bad = regression.compare(bad, step, metric=metric, goal=goal, settings=settings, history=[good])
    no_worse = vs_good.verdict in (regression.NO_CHANGE, regression.IMPROVEMENT)
    if no_worse and vs_bad.verdict == regression.IMPROVEMENT:
        return StepVerdict(GOOD_LIKE, vs_good, vs_bad)
    no_better = vs_bad.verdict in (regression.NO_CHANGE, regression.REGRESSION)
    if vs_good.verdict == regression.REGRESSION and no_better:
        return StepVerdict(BAD_LIKE, vs_good, vs_bad)
    return StepVerdict(UNDECIDED, vs_good, vs_bad)


def reproduced(
    good: regression.Launches,
    bad: regression.Launches,
    *,
    metric: str,
    goal: str,
    settings: regression.Settings = regression.DEFAULT_SETTINGS,
) -> regression.Verdict:
    """The bad end against the good end: a bisection starts only from a regression."""
    return regression.compare(good, bad, metric=metric, goal=goal, settings=settings)
