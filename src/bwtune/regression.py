"""Regression verdicts, change points and attribution over a config's history (controller only).

Samples are grouped by launch: a launch is one start of a server (one results line, or one
earlier attempt of it kept by the database), holding that launch's per-repetition values.
Launches matter because most of the noise is launch to launch (the stand-in's profile says
2% cv, and repetitions inside one launch share it); repetitions inside one launch alone
would understate the noise and raise false alarms.

`compare` gives one verdict per config and metric:
- `regression` / `improvement`: a Mann-Whitney U test (scipy) rejects "same distribution"
  at `alpha`, the medians differ by at least `min_effect` (default 3%) AND by at least
  `noise_z` standard errors of the ratio, estimated from the spread of launch means (widened
  by Student's t for the few degrees of freedom such an estimate has).
- `inconclusive`: the change would count but sits inside the noise, or the candidate run's
  own launches spread more than `max_noise`, or there are too few samples. Never a regression.
- `no change`: otherwise.
A config that was ok and now fails is a `regression` carrying its failure class.

`change_points` finds where the level of a config's history moved with E-divisive means
(Matteson & James 2014, "A Nonparametric Approach for Multiple Change Point Analysis of
Multivariate Data", JASA 109(505)), the method of MongoDB's and Apache Otava's performance
CI: a slow drift of 2% a night, under the effect size at every single step, still moves the
level. MongoDB's `signal-processing-algorithms` package was not used: it pins numpy < 2,
gevent and structlog and builds a C extension; the algorithm below is the paper's,
with its permutation test, on numpy.

`changed_components` names what changed between two stacks (results line field `stack`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from ansible_collections.bwtune.sglang.plugins.module_utils._facts import stack_info

REGRESSION, IMPROVEMENT, NO_CHANGE, INCONCLUSIVE = "regression", "improvement", "no change", "inconclusive"
VERDICTS = (REGRESSION, IMPROVEMENT, NO_CHANGE, INCONCLUSIVE)

# The key latencies compared besides the objective (names as sglang.bench_serving writes them).
KEY_LATENCIES = ("median_ttft_ms", "median_itl_ms", "p99_itl_ms")
# Every other metric of that family is lower-is-better; throughputs are higher-is-better.
LOWER_IS_BETTER_SUFFIXES = ("_ms",)

# The stack components attribution names, in this order, with the words a user reads: the
# list a results line's `stack` records, owned by stack_info (the node fills it).
COMPONENTS = stack_info.COMPONENTS


@dataclass(frozen=True)
class Settings:
    min_effect: float = 0.03  # relative change of the median that matters
    alpha: float = 0.05  # Mann-Whitney U significance level
    noise_z: float = 2.5  # a change must exceed this many standard errors of the ratio
    max_noise: float = 0.10  # a run whose launch means spread more (cv) decides nothing
    change_point_alpha: float = 0.05  # E-divisive permutation test level
    permutations: int = 199
    recent_runs: int = 5  # a change point among the newest runs is news; an older one was told
    history_window: int = 60  # change points look at the newest runs only (the cost is cubic)

    def check(self) -> None:
        if not 0 < self.min_effect < 1:
            raise ValueError(f"--min-effect {self.min_effect}: a fraction between 0 and 1 (0.03 is 3%)")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha {self.alpha}: between 0 and 1")


DEFAULT_SETTINGS = Settings()


def goal_of(metric: str, objective: Mapping[str, Any] | None = None) -> str:
    """max or min: the objective's own goal for its metric, else by the metric's unit."""
    if objective and objective.get("metric") == metric and objective.get("goal"):
        return str(objective["goal"])
    return "min" if metric.endswith(LOWER_IS_BETTER_SUFFIXES) else "max"


# --------------------------------------------------------------------------- noise


Launches = Sequence[Sequence[float]]


def _values(launches: Launches) -> list[float]:
    return [float(v) for launch in launches for v in launch]


def _launch_means(launches: Launches) -> list[float]:
    return [statistics.fmean(launch) for launch in launches if launch]


def launch_noise(*sides: Launches) -> tuple[float | None, int]:
    """Pooled relative spread (cv) of launch means around their own side's mean, with its
    degrees of freedom; (None, 0) when no side has two launches."""
    squares, dof, scale = 0.0, 0, []
    for side in sides:
        means = _launch_means(side)
        if len(means) < 2:
            continue
        centre = statistics.fmean(means)
        squares += sum(((m - centre) / centre) ** 2 for m in means) if centre else 0.0
        dof += len(means) - 1
        scale.append(centre)
    if not dof:
        return None, 0
    return math.sqrt(squares / dof), dof


def repetition_noise(*sides: Launches) -> float | None:
    """Pooled relative spread of repetitions inside their launch (None: no launch has two)."""
    squares, dof = 0.0, 0
    for side in sides:
        for launch in side:
            if len(launch) < 2:
                continue
            centre = statistics.fmean(launch)
            if centre:
                squares += sum(((v - centre) / centre) ** 2 for v in launch)
                dof += len(launch) - 1
    return math.sqrt(squares / dof) if dof else None


# --------------------------------------------------------------------------- one comparison


@dataclass(frozen=True)
class Verdict:
    metric: str
    verdict: str
    goal: str
    reference_median: float | None = None
    candidate_median: float | None = None
    change: float | None = None  # candidate / reference - 1
    p_value: float | None = None
    noise: float | None = None  # standard error of the ratio (relative)
    launches: tuple[int, int] = (0, 0)  # reference, candidate
    failure_class: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        if self.failure_class:
            return f"{self.verdict} ({self.failure_class})"
        if self.change is None:
            return self.verdict
        return f"{self.verdict} ({self.change * 100:+.1f}%)"


def compare(
    reference: Launches,
    candidate: Launches,
    *,
    metric: str,
    goal: str,
    settings: Settings = DEFAULT_SETTINGS,
    history: Sequence[Launches] = (),
) -> Verdict:
    """The verdict for one metric of one config: candidate launches against reference ones.

    `history` (earlier runs' launches, each its own side) only sharpens the launch-noise
    estimate; it never moves the reference.
    """
    ref, cand = _values(reference), _values(candidate)
    counts = (len(reference), len(candidate))
    if len(ref) < 2 or len(cand) < 2:
        why = "no reference run" if not ref else "fewer than 2 samples on a side"
        return Verdict(metric, INCONCLUSIVE, goal, launches=counts, note=why)
    ref_median, cand_median = statistics.median(ref), statistics.median(cand)
    if ref_median == 0:
        return Verdict(
            metric, INCONCLUSIVE, goal, ref_median, cand_median, launches=counts, note="reference is 0"
        )
    change = cand_median / ref_median - 1.0
    from scipy import stats  # about 1 s to import: only when a verdict needs it, not per command

    p_value = float(stats.mannwhitneyu(cand, ref, alternative="two-sided").pvalue)
    # Runs of one launch each say nothing alone: together they show the launch spread (and any
    # real change among them, which only makes the verdict more careful).
    singles = [launch for side in history if len(side) == 1 for launch in side]
    several = [side for side in history if len(side) > 1]
    between, dof = launch_noise(reference, candidate, *several, singles)
    within = repetition_noise(reference, candidate) or 0.0
    if between is not None:
        noise = between * math.sqrt(1 / max(1, counts[0]) + 1 / max(1, counts[1]))
    else:  # one launch a side and no history: only the repetitions say anything
        noise = within * math.sqrt(1 / len(ref) + 1 / len(cand))
    own_means = _launch_means(candidate)
    own = (
        statistics.stdev(own_means) / statistics.fmean(own_means)
        if len(own_means) >= 2
        else repetition_noise(candidate)
    )
    base = Verdict(metric, NO_CHANGE, goal, ref_median, cand_median, change, p_value, noise, counts)
    if own is not None and own > settings.max_noise:
        return _with(
            base, INCONCLUSIVE, f"the run's own noise {own * 100:.1f}% > {settings.max_noise * 100:g}%"
        )
    large = abs(change) >= settings.min_effect
    if not (p_value < settings.alpha and large):
        return base
    if abs(change) < noise_band(settings.noise_z, dof) * noise:
        return _with(
            base, INCONCLUSIVE, f"{change * 100:+.1f}% is within the noise (±{noise * 100:.1f}% s.e.)"
        )
    worse = change < 0 if goal == "max" else change > 0
    return _with(base, REGRESSION if worse else IMPROVEMENT, "")


def noise_band(z: float, dof: int) -> float:
    """`z` standard errors, widened when the noise itself is estimated from few launches:
    scaled by t(0.99, dof) / N(0.99), so two launches a side (2 dof) need about 3x as much."""
    if dof <= 0:
        return z
    from scipy import stats  # lazily, as above

    return z * float(stats.t.ppf(0.99, dof) / stats.norm.ppf(0.99))


def _with(verdict: Verdict, name: str, note: str) -> Verdict:
    return Verdict(**{**asdict(verdict), "verdict": name, "note": note, "launches": verdict.launches})


def status_verdict(metric: str, goal: str, reference_status: str, candidate_status: str) -> Verdict | None:
    """The verdict when either side did not measure (None when both are ok)."""
    if reference_status == "ok" and candidate_status == "ok":
        return None
    if reference_status == "ok":
        return Verdict(metric, REGRESSION, goal, failure_class=candidate_status,
                       note=f"was ok, now {candidate_status}")  # fmt: skip
    if candidate_status == "ok":
        return Verdict(metric, IMPROVEMENT, goal, note=f"was {reference_status}, now ok")
    return Verdict(metric, NO_CHANGE if reference_status == candidate_status else INCONCLUSIVE, goal,
                   note=f"{reference_status} -> {candidate_status}")  # fmt: skip


# --------------------------------------------------------------------------- change points


def _divergence(x: np.ndarray, y: np.ndarray, exponent: float) -> float:
    """Matteson & James (2014) eq. (3) scaled: Q = mn/(m+n) * (2 E|X-Y| - E|X-X'| - E|Y-Y'|)."""
    m, n = len(x), len(y)
    between = np.abs(x[:, None] - y[None, :]) ** exponent
    within_x = np.abs(x[:, None] - x[None, :]) ** exponent
    within_y = np.abs(y[:, None] - y[None, :]) ** exponent
    e_xy = 2.0 * between.mean()
    e_xx = within_x.sum() / (m * (m - 1)) if m > 1 else 0.0
    e_yy = within_y.sum() / (n * (n - 1)) if n > 1 else 0.0
    return float(m * n / (m + n) * (e_xy - e_xx - e_yy))


def _best_split(series: np.ndarray, min_size: int, exponent: float) -> tuple[int | None, float]:
    best, best_q = None, -math.inf
    for tau in range(min_size, len(series) - min_size + 1):
        q = _divergence(series[:tau], series[tau:], exponent)
        if q > best_q:
            best, best_q = tau, q
    return best, best_q


def e_divisive(
    series: Sequence[float],
    *,
    alpha: float = 0.05,
    permutations: int = 199,
    min_size: int = 3,
    exponent: float = 1.0,
    seed: int = 0,
) -> list[int]:
    """Change points (indices where a new segment starts) by E-divisive means.

    Hierarchical divisive estimation: in every current segment find the split that
    maximizes the energy divergence; take the best over all segments and keep it when a
    permutation test (observations permuted within each segment, `permutations` rounds)
    gives p < alpha; repeat until a split fails. Seeded: the same series gives the same
    answer. Matteson & James (2014), sections 2-3.
    """
    data = np.asarray(series, dtype=float)
    rng = np.random.default_rng(seed)
    points: list[int] = []
    while True:
        bounds = [0, *sorted(points), len(data)]
        candidates = []
        for start, end in itertools.pairwise(bounds):
            tau, q = _best_split(data[start:end], min_size, exponent)
            if tau is not None:
                candidates.append((q, start + tau, start, end))
        if not candidates:
            return sorted(points)
        q_obs, where, _s, _e = max(candidates)
        exceed = 0
        for _ in range(permutations):
            shuffled = data.copy()
            for start, end in itertools.pairwise(bounds):
                shuffled[start:end] = rng.permutation(shuffled[start:end])
            q_perm = max(
                (_best_split(shuffled[s:e], min_size, exponent)[1] for s, e in itertools.pairwise(bounds)),
                default=-math.inf,
            )
            exceed += q_perm >= q_obs
        if (exceed + 1) / (permutations + 1) >= alpha:
            return sorted(points)
        points.append(where)


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first run of the new level
    run_id: str
    last_good_run: str
    before: float  # median level of the segment before
    after: float  # median level of the segment from here
    change: float  # after / before - 1
    verdict: str  # regression / improvement / no change (under min_effect)
    components: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HistoryPoint:
    run_id: str
    created_at: str
    level: float | None  # median of the run's ok launches' samples; None: none measured
    status: str = "ok"  # a failure class when any launch failed (then `failed_launches` > 0)
    stack: Mapping[str, Any] | None = None
    stack_fingerprint: str | None = None
    launches: int = 0
    failed_launches: int = 0


def change_points(
    history: Sequence[HistoryPoint], goal: str, settings: Settings = DEFAULT_SETTINGS
) -> list[ChangePoint]:
    """Where the level of a config's history moved (measured runs only, oldest first)."""
    measured = [point for point in history if point.level is not None][-settings.history_window :]
    levels = [float(point.level) for point in measured if point.level is not None]
    found = []
    indices = e_divisive(levels, alpha=settings.change_point_alpha, permutations=settings.permutations)
    bounds = [0, *indices, len(levels)]
    for number, index in enumerate(indices, start=1):
        before = statistics.median(levels[bounds[number - 1] : index])
        after = statistics.median(levels[index : bounds[number + 1]])
        change = after / before - 1.0 if before else 0.0
        worse = change < 0 if goal == "max" else change > 0
        verdict = NO_CHANGE if abs(change) < settings.min_effect else (REGRESSION if worse else IMPROVEMENT)
        good, bad = measured[index - 1], measured[index]
        found.append(
            ChangePoint(
                index,
                bad.run_id,
                good.run_id,
                before,
                after,
                change,
                verdict,
                tuple(changed_components(good, bad)),
            )
        )
    return found


# --------------------------------------------------------------------------- attribution


def changed_components(
    good: HistoryPoint | Mapping[str, Any], bad: HistoryPoint | Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The stack components that differ between the last good and the first bad run:
    [{"component", "name", "before", "after"}]. When a side lacks the recorded components
    but the fingerprints differ, one entry says so."""
    good_stack, good_fp = _stack_of(good)
    bad_stack, bad_fp = _stack_of(bad)
    if good_stack is None or bad_stack is None:
        if good_fp and bad_fp and good_fp != bad_fp:
            return [{"component": "stack_fingerprint", "name": "stack (components not recorded)",
                     "before": good_fp, "after": bad_fp}]  # fmt: skip
        return []
    return [
        {"component": key, "name": name, "before": good_stack.get(key), "after": bad_stack.get(key)}
        for key, name in COMPONENTS
        if good_stack.get(key) != bad_stack.get(key)
    ]


def _stack_of(side: HistoryPoint | Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str | None]:
    if isinstance(side, HistoryPoint):
        return side.stack, side.stack_fingerprint
    return side.get("stack"), side.get("stack_fingerprint")


def attribution_text(components: Sequence[Mapping[str, Any]]) -> str:
    if not components:
        return "no stack component changed"
    return "; ".join(f"{c['name']} {c['before']} -> {c['after']}" for c in components)


def objective_repetitions(record: Mapping[str, Any], objective: Mapping[str, Any]) -> list[float]:
    """One results line's repetition values of the objective (the report's dot plots use it)."""
    return contract.metric_repetitions(record, objective)


def metric_repetitions(record: Mapping[str, Any], workload: str, metric: str) -> list[float]:
    """A results line's per-repetition values of one metric: one launch's samples. A line
    without repetitions gives its summary value, when it has one."""
    values = contract.metric_repetitions(record, {"workload": workload, "metric": metric})
    summary = ((record.get("metrics") or {}).get(workload) or {}).get("values") or {}
    if not values and summary.get(metric) is not None:
        values = [float(summary[metric])]
    return values
