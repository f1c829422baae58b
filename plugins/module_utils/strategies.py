# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which configs of a plan a sweep launches, and in what order.

A strategy is a generator over the plan's configs: it yields the id of the next
config to launch and reads the results recorded so far (``Scoreboard``) before it
decides the next one. The caller launches, measures, records, then resumes it.

- ``grid``: every valid config, in plan order.
- ``coordinate``: from a baseline, vary one axis at a time (the others at the
  baseline), keep each axis's best value, then launch the best of each combined,
  as SGLang's auto_benchmark tiers do.
- ``screen``: every valid config, but each launch starts with a short screening
  workload; the full workloads run only when the screening result is not
  statistically worse than the best screening result so far (see ``screen_gate``).
- ``adaptive``: screened like ``screen``, but only one axis at a time from the baseline,
  then the configs a model of the measured landscape says can still win (``adaptive``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

Levels = tuple[str, ...]

from ansible_collections.bwtune.sglang.plugins.module_utils import (
    capacity_search,
    results_contract,
    strategy_model,
)

# The names are the contract's (the CLI and the module offer the same choices).
STRATEGIES = results_contract.STRATEGIES
# Strategies whose launches start with the short screening workload (``screen_gate``).
SCREENING = ("screen", "adaptive")
SCREEN = results_contract.SCREEN_WORKLOAD
# Strategies that may name a measured config again (a re-measure, ``finals``) and leave out
# by themselves what the scoreboard already holds: the sweep launches every id they name.
# Every strategy re-measures a winner whose lead is within the measured noise (``finals``).
REMEASURING = ("grid", "coordinate", "screen", "adaptive")


class Objective:
    """The matrix's objective: a metric of one workload, to maximise or minimise.

    Defaults and the value a line competes with are results_contract's, so the node's
    strategies optimise what the controller's report ranks by.
    """

    def __init__(self, workload: str | None, metric: str, goal: str = "max") -> None:
        self.workload = workload
        self.metric = metric
        self.goal = goal

    @classmethod
    def from_matrix(cls, matrix: dict[str, Any]) -> Objective:
        objective = results_contract.objective_of(matrix)
        return cls(workload=objective["workload"], metric=objective["metric"], goal=objective["goal"])

    def as_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "metric": self.metric, "goal": self.goal}

    def better(self, a: float, b: float) -> bool:
        return results_contract.better(a, b, self.goal)

    def value(self, result: dict[str, Any], workload: str | None = None) -> float | None:
        """The objective value of a result line, or None when it has none (failed, pruned)."""
        return results_contract.eligible_value(result, self.as_dict(), workload)

    def interval(self, result: dict[str, Any], workload: str | None = None) -> tuple[float, float] | None:
        ci = results_contract.metric_ci95(result, self.as_dict(), workload)
        if ci is not None:
            return ci
        value = self.value(result, workload)
        return (value, value) if value is not None else None


class Scoreboard:
    """Results recorded so far in this sweep (and the ones resumed from the results file)."""

    def __init__(self, objective: Objective) -> None:
        self.objective = objective
        # config id -> its last line; every line of a config re-measured is in `history`.
        self.results: dict[str, dict[str, Any]] = {}
        self.history: dict[str, list[dict[str, Any]]] = {}

    def record(self, result: dict[str, Any]) -> None:
        self.results[result["config_id"]] = result
        self.history.setdefault(result["config_id"], []).append(result)

    def launches(self, config_id: str) -> int:
        return len(self.history.get(config_id, ()))

    def pooled(self, config_id: str, workload: str | None = None) -> float | None:
        """The mean of a config's values over its launches (None when none has one), pooled
        as `pick_best` pools them (results_contract.pooled_launches): the launches on the
        host and stack of its last line."""
        history = self.history.get(config_id)
        if not history:
            return None
        objective = dict(self.objective.as_dict(), workload=workload or self.objective.workload)
        groups = results_contract.pooled_launches(history, objective)
        current = groups.get(results_contract.launch_key(history[-1]))
        return None if current is None else current[0]

    def value(self, config_id: str) -> float | None:
        result = self.results.get(config_id)
        return self.objective.value(result) if result else None

    def best(self, config_ids: list[str] | None = None) -> str | None:
        """The best config among `config_ids` (all recorded when None), by the contract's rule."""
        ids = config_ids if config_ids is not None else list(self.results)
        # Every launch of each config: a re-measured one competes with its pooled mean.
        lines = [line for i in dict.fromkeys(ids) for line in self.history.get(i, ())]
        best = results_contract.pick_best(lines, self.objective.as_dict())
        return None if best is None else str(best["config_id"])


def screen_passes(candidate: tuple[float, float], best: tuple[float, float] | None, goal: str) -> bool:
    """True unless the candidate's 95% interval lies wholly on the worse side of the best's.

    Overlapping intervals mean "not statistically worse": such a config earns the full
    workloads. A single repetition gives a zero-width interval, so it is then a plain
    comparison with the best.
    """
    if best is None:
        return True
    if goal == "max":
        return candidate[1] >= best[0]
    return candidate[0] <= best[1]


def screen_workload(workloads: list[dict[str, Any]], objective_workload: str | None) -> dict[str, Any]:
    """A short version of the objective's workload: same shape, fewer and shorter requests."""
    base = next((w for w in workloads if w["name"] == objective_workload), workloads[0])
    if base.get("capacity"):
        # A capacity search (capacity_search) screened by a short one: three rounds of the
        # fewest requests a p99 allows, shorter outputs, the same SLO.
        return dict(
            base,
            name=SCREEN,
            output_len=min(int(base["output_len"]), 128),
            num_prompts=capacity_search.MIN_ROUND_REQUESTS,
            repetitions=1,
            warmup=1,
            capacity=dict(base["capacity"], max_rounds=min(3, int(base["capacity"].get("max_rounds") or 3))),
        )
    concurrency = int(base.get("concurrency") or 1)
    prompts = max(concurrency, 4)
    output_len = min(int(base["output_len"]), 128)
    # Never more than a quarter of the objective workload's decode tokens: on a small
    # workload (4 x 128 tokens) a fixed-size screen would cost more than the workload itself.
    full = (
        int(base["output_len"]) * int(base.get("num_prompts") or prompts) * int(base.get("repetitions") or 1)
    )
    repetitions = 3
    while repetitions > 1 and repetitions * prompts * output_len > full / 4:
        repetitions -= 1
    output_len = max(8, min(output_len, full // (4 * repetitions * prompts)))
    return dict(
        base,
        name=SCREEN,
        output_len=output_len,
        num_prompts=prompts,
        repetitions=repetitions,
        warmup=1,
    )


def screen_gate(scores: Scoreboard, screen_metrics: dict[str, Any]) -> bool:
    """Whether a launch earns its full workloads after its screening workload.

    It does unless its screening interval is wholly worse than the best screening result
    recorded so far (``screen_passes``). The best is read from the scoreboard, resumed lines
    included, so the decision is a function of the results file.
    """
    objective = scores.objective
    probe = {"status": "ok", "metrics": {SCREEN: screen_metrics}}
    interval = objective.interval(probe, SCREEN)
    if interval is None:
        return False
    # The interval of one launch holds its repetitions only; two launches also differ by the
    # launch-to-launch noise measured in this run (``launch_noise``): widen by NOISE_Z standard
    # errors of the difference of two launches, so a config measured low by chance still earns
    # its full workloads.
    widen = math.exp(NOISE_Z * math.sqrt(2.0) * launch_noise(scores))
    interval = (interval[0] / widen, interval[1] * widen)
    best: tuple[float, float] | None = None
    best_value: float | None = None
    for config_id in sorted(scores.results):
        line = scores.results[config_id]
        value = objective.value(line, SCREEN)
        if value is not None and (best_value is None or objective.better(value, best_value)):
            best, best_value = objective.interval(line, SCREEN), value
    return screen_passes(interval, best, objective.goal)


def _valid_ids(plan: dict[str, Any]) -> list[str]:
    return [launch["config"] for launch in plan.get("launches", [])]


def grid(plan: dict[str, Any], scores: Scoreboard) -> Iterator[str]:
    """Every valid config once, then ``finals``: a winner whose lead is within the measured
    noise is measured again (what the scoreboard holds already is not launched again)."""
    valid = _valid_ids(plan)
    for config_id in valid:
        if config_id not in scores.results:
            yield config_id
    yield from finals(valid, scores, FINALISTS, REPEATS, REMEASURES)


def _point_key(point: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((axis, repr(value)) for axis, value in point.items()))


class _Space:
    """The plan's matrix points and which config id launches each."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.configs = {c["id"]: c for c in plan.get("configs", [])}
        self.by_point = {_point_key(c["point"]): c for c in self.configs.values()}
        self.valid = _valid_ids(plan)
        self.valid_set = set(self.valid)

    def launchable(self, point: dict[str, Any]) -> str | None:
        """The id to launch for a matrix point (following duplicates), or None if it can't run."""
        config = self.by_point.get(_point_key(point))
        while config is not None and config.get("status") == "duplicate":
            config = self.configs.get(config.get("duplicate_of") or "")
        return config["id"] if config is not None and config["id"] in self.valid_set else None

    def start(self, axes: dict[str, list[Any]], baseline: dict[str, Any] | None) -> dict[str, Any] | None:
        start = dict(baseline or {axis: values[0] for axis, values in axes.items()})
        if self.launchable(start) is not None:
            return start
        # The baseline itself is refused: start from the first valid config instead.
        return dict(self.configs[self.valid[0]]["point"]) if self.valid else None


def one_axis_at_a_time(
    plan: dict[str, Any],
    scores: Scoreboard,
    axes: dict[str, list[Any]],
    baseline: dict[str, Any] | None = None,
    best_values: dict[str, Any] | None = None,
    only: dict[str, list[Any]] | None = None,
) -> Iterator[str]:
    """From a baseline, vary one axis at a time, the others at the baseline (auto_benchmark's
    first tier). ``best_values``, when given, receives each axis's best value; ``only``, when
    given, limits the values tried on each axis (the baseline's own is always measured)."""
    space = _Space(plan)
    start = space.start(axes, baseline)
    if start is None:
        return
    for axis, values in axes.items():
        tried: list[tuple[Any, str]] = []
        for value in values:
            if only is not None and value not in only.get(axis, values) and value != start[axis]:
                continue
            config_id = space.launchable({**start, axis: value})
            if config_id is None:
                continue
            if config_id not in scores.results:
                yield config_id
            tried.append((value, config_id))
        if best_values is not None:
            winner = scores.best([config_id for _value, config_id in tried])
            best_values[axis] = next((v for v, c in tried if c == winner), start[axis])


def coordinate(
    plan: dict[str, Any],
    scores: Scoreboard,
    axes: dict[str, list[Any]],
    baseline: dict[str, Any] | None = None,
) -> Iterator[str]:
    best_values: dict[str, Any] = {}
    yield from one_axis_at_a_time(plan, scores, axes, baseline, best_values)
    space = _Space(plan)
    start = space.start(axes, baseline)
    if start is None:
        return
    combined = space.launchable({**start, **best_values})
    if combined is not None and combined not in scores.results:
        yield combined
    yield from finals(space.valid, scores, FINALISTS, REPEATS, REMEASURES)


# Launch-to-launch noise is measured in each run (``launch_noise``): the relative spread of
# the objective between launches of one config, pooled over the configs launched twice or
# more, each config's own spread shrunk towards the pool (per backend where the data allow).
# Until a config has been launched twice, NOISE_PRIOR stands in (worth NOISE_PRIOR_DOF
# degrees of freedom: it is outweighed as soon as this run has measured a few).
NOISE_PRIOR = 0.03
NOISE_PRIOR_DOF = 2.0
NOISE_FLOOR = 0.005
# A win counts when it exceeds NOISE_Z standard errors of the difference (finals, screening).
NOISE_Z = 2.0
# finals: the best and up to FINALISTS - 1 configs whose gap to it is within the noise are
# launched again, the least measured first, up to REPEATS launches each (the plan announces
# them). They end when the measured noise says the lead is real or every finalist has its
# REPEATS launches; the re-measures in all are capped only by that (FINALISTS x (REPEATS - 1)):
# a cap of three stopped the finals while contenders were still within the noise in 9 of the
# 12 misses (regret > 3%) of adaptive on 200 tuning seeds of `heteroscedastic`
# (docs/benchmarks.md, "The heteroscedastic worst case").
FINALISTS = 3
REPEATS = 3
REMEASURES = FINALISTS * (REPEATS - 1)
# adaptive: a config can still win when its prediction plus ADAPTIVE_Z errors of one score
# (the measured noise, or the model's misfit when larger: interactions), scaled by how rarely
# its values were measured, beats the best score by more than the measured noise. A wide
# bound (z = 4) finds interactions a main-effects model cannot see; ADAPTIVE_BUDGET caps the
# distinct configs launched, failed ones included (the plan announces it: planned_launches).
ADAPTIVE_Z = 4.0
ADAPTIVE_BUDGET = 1.0 / 3.0
# Kept for callers: the finals' sizes are the shared ones above.
ADAPTIVE_FINALISTS = FINALISTS
ADAPTIVE_REPEATS = REPEATS
# A value whose launches failed: each failure is evidence that the value (and the configs
# that share it) fails; a config's bound is lowered by log(1 - p) per such value, p the
# value's failure rate with one success assumed (Laplace), at most FAIL_CAP of it.
FAIL_CAP = 0.95
# With a prior (earlier runs' values on the same hardware group) adaptive starts from the
# prior's best config, and an axis value the prior puts more than PRIOR_MARGIN behind the best
# value of its axis (here: 1.5x slower) is not tried. Chosen on the tuning seeds' second runs
# (docs/benchmarks.md: 0.25 misses more after drift, 1.0 costs 3 points more, finds no more).
PRIOR_MARGIN = 0.5


def adaptive_score(scores: Scoreboard, config_id: str) -> float | None:
    """What ``adaptive`` compares configs by: the screening value (every adaptive launch has
    one, the same short workload for all), else the objective's value, as a log score."""
    value = scores.pooled(config_id, SCREEN)
    if value is None:
        value = scores.pooled(config_id)
    return None if value is None else strategy_model.score(value, scores.objective.goal)


def _launch_logs(scores: Scoreboard, config_id: str) -> list[float]:
    """The log objective values of a config's launches that measured one (pooled as
    ``pick_best`` pools them: the host and stack of its last line)."""
    history = scores.history.get(config_id) or []
    if not history:
        return []
    key = results_contract.launch_key(history[-1])
    logs = []
    for line in history:
        if results_contract.launch_key(line) != key:
            continue
        value = scores.objective.value(line)
        if value is not None and value > 0:
            logs.append(math.log(value))
    return logs


def _sum_squares(logs: list[float]) -> tuple[float, int]:
    if len(logs) < 2:
        return 0.0, 0
    mean = math.fsum(logs) / len(logs)
    return math.fsum((x - mean) ** 2 for x in logs), len(logs) - 1


def launch_noise(scores: Scoreboard, config_id: str | None = None) -> float:
    """The launch-to-launch noise this run measured, as a relative standard deviation.

    Pooled over every config launched twice or more (with NOISE_PRIOR worth NOISE_PRIOR_DOF
    degrees of freedom); with ``config_id``, that config's own spread shrunk towards the pool
    (its backend's noise, where it was launched twice), never below the pool.
    """
    ss = NOISE_PRIOR * NOISE_PRIOR * NOISE_PRIOR_DOF
    dof = NOISE_PRIOR_DOF
    for other in sorted(scores.history):
        o_ss, o_dof = _sum_squares(_launch_logs(scores, other))
        ss, dof = ss + o_ss, dof + o_dof
    pooled = max(NOISE_FLOOR, math.sqrt(ss / dof))
    if config_id is None:
        return pooled
    own_ss, own_dof = _sum_squares(_launch_logs(scores, config_id))
    if own_dof == 0:
        return pooled
    own = math.sqrt((pooled * pooled * NOISE_PRIOR_DOF + own_ss) / (NOISE_PRIOR_DOF + own_dof))
    return max(pooled, own)


def _failure_penalty(space: _Space, scores: Scoreboard, names: list[str]) -> dict[tuple[str, str], float]:
    """(axis, value key) -> log(1 - p): what the failed launches say of the configs that share
    a value with them. Each failure is blamed on its config's values in proportion to how often
    each failed elsewhere (a value that also ran fine takes little of it: the crash is
    explained by its neighbour); p is the value's blame over its launches, one success assumed.
    """
    ok: dict[tuple[str, str], int] = {}
    failed: dict[tuple[str, str], int] = {}
    failures: list[list[tuple[str, str]]] = []
    for config_id in space.valid:
        line = scores.results.get(config_id)
        if line is None:
            continue
        keys = list(
            zip(names, strategy_model.levels_of(space.configs[config_id]["point"], names), strict=True)
        )
        counts = ok if line.get("status") == "ok" else failed
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
        if line.get("status") != "ok":
            failures.append(keys)
    rate = {key: f / (f + ok.get(key, 0) + 1.0) for key, f in failed.items()}
    blame: dict[tuple[str, str], float] = {}
    for keys in failures:
        total = math.fsum(rate[k] for k in keys)
        for key in keys:
            blame[key] = blame.get(key, 0.0) + rate[key] / total
    return {key: math.log(1.0 - min(FAIL_CAP, b / (b + ok.get(key, 0) + 1.0))) for key, b in blame.items()}


def adaptive(
    plan: dict[str, Any],
    scores: Scoreboard,
    axes: dict[str, list[Any]],
    baseline: dict[str, Any] | None = None,
    error: float | None = None,
    z: float | None = None,
    finalists: int | None = None,
    repeats: int | None = None,
    margin: float | None = None,
    prior: dict[str, float] | None = None,
    prior_margin: float | None = None,
    budget: float | None = None,
) -> Iterator[str]:
    """One axis at a time from the baseline, the best value of each axis combined, then
    model-guided launches until no config left can beat the best measured one by more than
    the noise this run measured; then ``finals``.

    After each launch a main-effects model (strategy_model) is fitted to every score so
    far. Each config not launched yet gets an optimistic bound: its prediction plus ``z``
    errors of one score (the measured noise, or the model's misfit when larger) times the
    model's spread for its values, lowered for values whose launches failed
    (``_failure_penalty``). A value only ever measured in failed launches is predicted at its
    axis's worst effect, not "unmeasured". The next launch is the config with the highest
    bound (a value never launched comes first); the search stops when no bound beats the
    best measured score by more than the noise, or once ``budget`` (a share) of the valid
    configs has been launched, failed ones included: the plan announces it. On a flat top
    (``is_flat``: the configs measured differ no more than the launch noise makes one config's
    launches differ) the finals' re-measures go to untested configs instead, while it stays
    flat: re-measuring configs the data cannot tell apart ranks nothing, and the distinct
    configs plus the re-measures keep the announced budget. When most launches failed, the
    failures are everywhere and no config is left out for its values' failures. Every decision
    reads only the scoreboard, in plan order: a resumed sweep decides the same.
    ``error`` and ``margin``, when given, replace the measured noise (ablations).
    """
    z = ADAPTIVE_Z if z is None else z
    finalists = FINALISTS if finalists is None else finalists
    repeats = REPEATS if repeats is None else repeats
    budget = ADAPTIVE_BUDGET if budget is None else budget
    space = _Space(plan)
    names = list(axes)
    cap = math.ceil(budget * len(space.valid) - 1e-9)
    plausible: dict[str, list[Any]] | None = None
    first: str | None = None
    known = _prior_scores(space, prior or {}, scores.objective.goal)
    if len(known) >= 2:
        # What earlier runs measured: start from their best config, and try on each axis only
        # the values within PRIOR_MARGIN of the best value there (values they never measured
        # are tried: nothing is known of them).
        baseline = dict(space.configs[max(sorted(known), key=lambda c: known[c])]["point"])
        plausible = _plausible_values(
            space, names, axes, known, PRIOR_MARGIN if prior_margin is None else prior_margin
        )
        first = space.launchable(baseline)
        if first is not None and first not in scores.results:
            yield first  # the likeliest winner first: the screens after it compare with it
    best_values: dict[str, Any] = {}
    # The distinct configs the budget allows: a third of the valid ones, or the one-axis pass
    # when it is longer (what planned_launches announces). A function of the plan and the
    # prior alone, so a resumed sweep counts the same.
    passed = set(one_axis_at_a_time(plan, Scoreboard(scores.objective), axes, baseline, only=plausible))
    allowed = max(cap, len(passed | ({first} if first is not None else set())))
    yield from one_axis_at_a_time(plan, scores, axes, baseline, best_values, only=plausible)
    start = space.start(axes, baseline)
    if start is not None and best_values:
        # The best value of each axis, combined (coordinate's last launch).
        combined = space.launchable({**start, **best_values})
        launched = sum(config_id in scores.results for config_id in space.valid)
        if combined is not None and combined not in scores.results and launched < max(cap, 1):
            yield combined
    while True:
        observations = []
        incumbent: float | None = None
        untested: list[str] = []
        for config_id in space.valid:
            if config_id not in scores.results:
                point = space.configs[config_id]["point"]
                if plausible is None or all(point[a] in plausible[a] for a in names):
                    untested.append(config_id)
                continue
            value = adaptive_score(scores, config_id)
            if value is None:
                continue
            levels = strategy_model.levels_of(space.configs[config_id]["point"], names)
            observations.append((levels, value))
            incumbent = value if incumbent is None else max(incumbent, value)
        if not untested:
            break
        # The budget counts every distinct config launched, failed ones included; it holds
        # once some config has run. Until then a working config is what the sweep needs
        # first, so the search goes on, each config at most once (the plan says so:
        # launches_while_nothing_runs).
        launched = sum(config_id in scores.results for config_id in space.valid)
        noise = launch_noise(scores) if error is None else error
        # A flat top: the finals' re-measures are spent on untested configs (they may hold a
        # peak), while the measured configs stay as alike as the noise makes them.
        spare = REMEASURES if _finals_buy_nothing(space, scores, noise) else 0
        if launched >= allowed + spare and incumbent is not None:
            break
        model = strategy_model.MainEffects(len(names), observations)
        one_error = max(math.log1p(noise), model.misfit())
        penalty = _failure_penalty(space, scores, names)
        # More than half of the launches failed: the failures are everywhere, a value's share
        # of them does not single it out (mostly-failing landscapes: every value then looked
        # likelier to fail than run and the search stopped short of the working configs), so
        # they only order the configs, least implicated first.
        lines = [scores.results[c] for c in space.valid if c in scores.results]
        everywhere = 2 * sum(line.get("status") != "ok" for line in lines) > len(lines)
        failures: dict[tuple[str, str], int] = {}
        for config_id in space.valid:
            line = scores.results.get(config_id)
            if line is not None and line.get("status") != "ok":
                point = space.configs[config_id]["point"]
                for key in zip(names, strategy_model.levels_of(point, names), strict=True):
                    failures[key] = failures.get(key, 0) + 1
        chosen: str | None = None
        # A value never measured in a launch that ran: nothing to predict with, so it comes
        # first, in the config its failures (if any) least suggest fails; once its failures
        # say a config more likely fails than runs (p >= 1/2 in all), that config is learned
        # from: not launched (it cannot win by failing).
        explore: tuple[float, str] | None = None
        predicted: list[tuple[str, Levels, float]] = []
        least_implicated: tuple[float, str] | None = None
        for config_id in untested:
            levels = strategy_model.levels_of(space.configs[config_id]["point"], names)
            risk = sum(penalty.get((names[n], level), 0.0) for n, level in enumerate(levels))
            if least_implicated is None or risk > least_implicated[0]:
                least_implicated = (risk, config_id)
            unknown = [n for n, level in enumerate(levels) if level not in model.effects[n]]
            if unknown:
                # one failure of a value may be its neighbour's fault: a second config tries it
                once = all(failures.get((names[n], levels[n]), 0) <= 1 for n in unknown)
                if (risk > math.log(0.5) or once or everywhere) and (explore is None or risk > explore[0]):
                    explore = (risk, config_id)
                continue
            predicted.append((config_id, levels, risk))
        if explore is not None:
            chosen = explore[1]
        elif incumbent is None and least_implicated is not None:
            # Nothing has run yet: the config the failures so far least implicate, in plan order.
            chosen = least_implicated[1]
        # The failure risk orders the candidates (a config its neighbours' crashes implicate
        # comes after one they do not), but never stops the search: what can still win is
        # read from the bound alone.
        floor = None if incumbent is None or model.dof < 0 else incumbent + math.log1p(noise)
        ranked_by: float | None = None
        for config_id, fill, risk in [] if explore is not None else predicted:
            prediction = model.predict(fill)
            if prediction is None:
                continue
            bound = prediction + z * one_error * model.spread(fill)
            if floor is not None and bound <= floor:
                continue
            if ranked_by is None or bound + risk > ranked_by:
                chosen, ranked_by = config_id, bound + risk
        if chosen is None:
            break
        # (An underdetermined model, a failed launch having left fewer scores than effects,
        # bounds nothing: ``floor`` is None and its best guess is launched.)
        yield chosen
    # Configs launched past the budget (a flat top's, or while nothing ran) took the finals'
    # re-measures: together they keep the announced budget. A function of how many distinct
    # configs the scoreboard holds, which the finals do not change: a resume decides the same.
    launched = sum(config_id in scores.results for config_id in space.valid)
    remeasures = REMEASURES - min(REMEASURES, max(0, launched - allowed))
    yield from finals(space.valid, scores, finalists, repeats, remeasures, margin)


def _chi2_upper(dof: int, z: float) -> float:
    """The upper quantile of a chi-square with ``dof`` degrees of freedom at ``z`` standard
    normal deviates (Wilson-Hilferty), divided by ``dof``: how far a variance estimated from
    ``dof`` degrees of freedom may exceed the true one by chance."""
    k = float(dof)
    return (1.0 - 2.0 / (9.0 * k) + z * math.sqrt(2.0 / (9.0 * k))) ** 3


def is_flat(values: list[float], noise: float) -> bool:
    """Whether log scores ``values`` of distinct configs differ no more than launches of one
    config do: their variance is within what the launch noise alone gives by chance
    (NOISE_Z deviates of a chi-square). Then nothing measured tells the configs apart."""
    if len(values) < 3:
        return False
    mean = math.fsum(values) / len(values)
    variance = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return variance <= math.log1p(noise) ** 2 * _chi2_upper(len(values) - 1, NOISE_Z)


def _finals_buy_nothing(space: _Space, scores: Scoreboard, noise: float) -> bool:
    """Whether this run's measurements say the finals' re-measures are better spent on
    untested configs: the configs measured so far are as alike as the launch noise makes one
    config's launches (``is_flat``: a flat top). Re-measuring configs the data cannot tell
    apart ranks nothing that matters; a config not launched yet may be a peak."""
    values = [adaptive_score(scores, c) for c in space.valid if c in scores.results]
    return is_flat([v for v in values if v is not None], noise)


def _prior_scores(space: _Space, prior: dict[str, float], goal: str) -> dict[str, float]:
    """config id -> log score of the prior's values for the configs this plan can launch."""
    return {
        config_id: strategy_model.score(float(value), goal)
        for config_id, value in prior.items()
        if config_id in space.valid_set and value is not None and float(value) > 0
    }


def _plausible_values(
    space: _Space,
    names: list[str],
    axes: dict[str, list[Any]],
    known: dict[str, float],
    margin: float,
) -> dict[str, list[Any]]:
    """Per axis, the values a main-effects fit of the prior does not put more than
    ``margin`` behind the axis's best value, and the values the prior never measured."""
    observations = [
        (strategy_model.levels_of(space.configs[c]["point"], names), known[c]) for c in sorted(known)
    ]
    model = strategy_model.MainEffects(len(names), observations)
    plausible: dict[str, list[Any]] = {}
    for n, axis in enumerate(names):
        effects = model.effects[n]
        top = max(effects.values())
        plausible[axis] = [
            v for v in axes[axis] if repr(v) not in effects or effects[repr(v)] >= top - math.log1p(margin)
        ]
    return plausible


def needs_screen(strategy: str, scores: Scoreboard, config_id: str) -> bool:
    """Whether this launch starts with the screening workload: a screening strategy's first
    launch of a config does; a re-measure (``finals``) runs the full workloads only."""
    return strategy in SCREENING and scores.launches(config_id) == 0


def finals(
    valid: list[str],
    scores: Scoreboard,
    finalists: int,
    repeats: int,
    remeasures: int = REMEASURES,
    margin: float | None = None,
) -> Iterator[str]:
    """Re-measure the best config while its lead does not exceed the measured noise.

    The contenders are the configs (up to ``finalists - 1``, by pooled objective value, as
    ``pick_best`` ranks them) whose gap to the best is within NOISE_Z standard errors of the
    difference of their pooled means, each config's noise from ``launch_noise`` (its own
    spread where it has one): one launch of a 9%-noise config cannot beat a runner-up 8%
    behind. The best and its contenders are launched again, the least measured first, up to
    ``repeats`` launches each and ``remeasures`` re-measures in all; the ranking and the noise
    are read again after each launch. ``margin``, when given, replaces the noise-derived gap
    (a fixed relative margin: ablations). A function of the scoreboard: a resumed sweep
    re-measures what is still missing, nothing twice.
    """
    if finalists < 2 or repeats < 2 or remeasures < 1:
        return
    goal = scores.objective.goal
    while True:
        ranked = []
        for config_id in valid:
            value = scores.pooled(config_id)
            if value is not None:
                ranked.append((-strategy_model.score(value, goal), config_id))
        if len(ranked) < 2:
            return
        ranked.sort()
        best_score, best = -ranked[0][0], ranked[0][1]

        def n_of(config_id: str) -> int:
            return max(len(_launch_logs(scores, config_id)), 1)

        sigma_best = launch_noise(scores, best)
        contenders = []
        for neg, config_id in ranked[1:]:
            if margin is not None:
                gap = math.log1p(margin)
            else:
                sigma = launch_noise(scores, config_id)
                gap = NOISE_Z * math.sqrt(sigma_best**2 / n_of(best) + sigma**2 / n_of(config_id))
            if best_score - (-neg) <= gap:
                contenders.append(config_id)
            if len(contenders) >= finalists - 1:
                break
        if not contenders:
            return
        done = sum(max(scores.launches(c) - 1, 0) for c in valid)
        if done >= remeasures:
            return
        group = [best, *contenders]
        missing = [c for c in group if scores.launches(c) < repeats]
        if not missing:
            return
        yield min(missing, key=lambda c: (scores.launches(c), group.index(c)))


def planned_launches(
    plan: dict[str, Any],
    axes: dict[str, list[Any]] | None = None,
    baseline: dict[str, Any] | None = None,
) -> dict[str, tuple[int, int]]:
    """The fewest and the most launches each strategy can make on a plan, before any result,
    failed launches included: the sweep never launches more than the most.

    Without ``axes`` the values of each axis are read from the plan's points, in the order
    the matrix expanded them (what the node's sweep gets from the matrix).
    """
    if axes is None:
        axes = {}
        for config in plan.get("configs", []):
            for axis, value in config["point"].items():
                if value not in axes.setdefault(axis, []):
                    axes[axis].append(value)
    valid = len(_valid_ids(plan))
    scores = Scoreboard(Objective(None, results_contract.DEFAULT_METRIC))
    # Nothing is recorded here, so the pass names the baseline once per axis: count ids once.
    first_pass = len(set(one_axis_at_a_time(plan, scores, axes, baseline)))
    # adaptive (no prior): the one-axis pass, then model-guided launches up to its budget of
    # distinct configs, then at most finalists x (repeats - 1) re-measures.
    searched = min(valid, max(first_pass, math.ceil(ADAPTIVE_BUDGET * valid - 1e-9)))

    # Every strategy's finals: at most REMEASURES re-measures, when at least two configs ran.
    def more(launches: int) -> int:
        return launches + (REMEASURES if launches >= 2 else 0)

    return {
        "grid": (valid, more(valid)),
        "coordinate": (first_pass, more(min(first_pass + 1, valid))),
        "screen": (valid, more(valid)),
        "adaptive": (first_pass, more(searched)),
    }


def launches_while_nothing_runs(plan: dict[str, Any]) -> int:
    """The most launches ``adaptive`` makes while every launch fails: each valid config once
    (its budget holds only once some config has run; `bwtune plan` says so)."""
    return len(_valid_ids(plan))


def run_order(
    strategy: str,
    plan: dict[str, Any],
    scores: Scoreboard,
    axes: dict[str, list[Any]],
    baseline: dict[str, Any] | None = None,
    prior: dict[str, float] | None = None,
) -> Iterator[str]:
    """The config ids to launch, one at a time; ``scores`` must be updated between steps.
    ``prior`` (config id -> value measured by earlier runs) guides ``adaptive`` only."""
    if strategy == "coordinate":
        return coordinate(plan, scores, axes, baseline)
    if strategy == "adaptive":
        return adaptive(plan, scores, axes, baseline, prior=prior)
    if strategy in ("grid", "screen"):
        return grid(plan, scores)
    raise ValueError("unknown strategy %r (expected one of %s)" % (strategy, ", ".join(STRATEGIES)))
