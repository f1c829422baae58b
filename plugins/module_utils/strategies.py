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
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract, strategy_model

# The names are the contract's (the CLI and the module offer the same choices).
STRATEGIES = results_contract.STRATEGIES
# Strategies whose launches start with the short screening workload (``screen_gate``).
SCREENING = ("screen", "adaptive")
SCREEN = results_contract.SCREEN_WORKLOAD
# Strategies that may name a measured config again (a re-measure, ``finals``) and leave out
# by themselves what the scoreboard already holds: the sweep launches every id they name.
REMEASURING = ("adaptive",)


class Objective:
    """The matrix's objective: a metric of one workload, to maximise or minimise.

    Defaults and the value a line competes with are results_contract's, so the node's
    strategies optimise what the controller's report ranks by.
    """

    def __init__(self, workload: Optional[str], metric: str, goal: str = "max") -> None:
        self.workload = workload
        self.metric = metric
        self.goal = goal

    @classmethod
    def from_matrix(cls, matrix: Dict[str, Any]) -> "Objective":
        objective = results_contract.objective_of(matrix)
        return cls(workload=objective["workload"], metric=objective["metric"], goal=objective["goal"])

    def as_dict(self) -> Dict[str, Any]:
        return {"workload": self.workload, "metric": self.metric, "goal": self.goal}

    def better(self, a: float, b: float) -> bool:
        return results_contract.better(a, b, self.goal)

    def value(self, result: Dict[str, Any], workload: Optional[str] = None) -> Optional[float]:
        """The objective value of a result line, or None when it has none (failed, pruned)."""
        return results_contract.eligible_value(result, self.as_dict(), workload)

    def interval(
        self, result: Dict[str, Any], workload: Optional[str] = None
    ) -> Optional[Tuple[float, float]]:
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
        self.results: Dict[str, Dict[str, Any]] = {}
        self.history: Dict[str, List[Dict[str, Any]]] = {}

    def record(self, result: Dict[str, Any]) -> None:
        self.results[result["config_id"]] = result
        self.history.setdefault(result["config_id"], []).append(result)

    def launches(self, config_id: str) -> int:
        return len(self.history.get(config_id, ()))

    def pooled(self, config_id: str, workload: Optional[str] = None) -> Optional[float]:
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

    def value(self, config_id: str) -> Optional[float]:
        result = self.results.get(config_id)
        return self.objective.value(result) if result else None

    def best(self, config_ids: Optional[List[str]] = None) -> Optional[str]:
        """The best config among `config_ids` (all recorded when None), by the contract's rule."""
        ids = config_ids if config_ids is not None else list(self.results)
        # Every launch of each config: a re-measured one competes with its pooled mean.
        lines = [line for i in dict.fromkeys(ids) for line in self.history.get(i, ())]
        best = results_contract.pick_best(lines, self.objective.as_dict())
        return None if best is None else str(best["config_id"])


def screen_passes(candidate: Tuple[float, float], best: Optional[Tuple[float, float]], goal: str) -> bool:
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


def screen_workload(workloads: List[Dict[str, Any]], objective_workload: Optional[str]) -> Dict[str, Any]:
    """A short version of the objective's workload: same shape, fewer and shorter requests."""
    base = next((w for w in workloads if w["name"] == objective_workload), workloads[0])
    concurrency = int(base.get("concurrency") or 1)
    return dict(
        base,
        name=SCREEN,
        output_len=min(int(base["output_len"]), 128),
        num_prompts=max(concurrency, 4),
        repetitions=3,
        warmup=1,
    )


def screen_gate(scores: Scoreboard, screen_metrics: Dict[str, Any]) -> bool:
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
    best: Optional[Tuple[float, float]] = None
    best_value: Optional[float] = None
    for config_id in sorted(scores.results):
        line = scores.results[config_id]
        value = objective.value(line, SCREEN)
        if value is not None and (best_value is None or objective.better(value, best_value)):
            best, best_value = objective.interval(line, SCREEN), value
    return screen_passes(interval, best, objective.goal)


def _valid_ids(plan: Dict[str, Any]) -> List[str]:
    return [launch["config"] for launch in plan.get("launches", [])]


def grid(plan: Dict[str, Any], scores: Scoreboard) -> Iterator[str]:
    yield from _valid_ids(plan)


def _point_key(point: Dict[str, Any]) -> Tuple[Tuple[str, str], ...]:
    return tuple(sorted((axis, repr(value)) for axis, value in point.items()))


class _Space:
    """The plan's matrix points and which config id launches each."""

    def __init__(self, plan: Dict[str, Any]) -> None:
        self.configs = {c["id"]: c for c in plan.get("configs", [])}
        self.by_point = {_point_key(c["point"]): c for c in self.configs.values()}
        self.valid = _valid_ids(plan)
        self.valid_set = set(self.valid)

    def launchable(self, point: Dict[str, Any]) -> Optional[str]:
        """The id to launch for a matrix point (following duplicates), or None if it can't run."""
        config = self.by_point.get(_point_key(point))
        while config is not None and config.get("status") == "duplicate":
            config = self.configs.get(config.get("duplicate_of") or "")
        return config["id"] if config is not None and config["id"] in self.valid_set else None

    def start(
        self, axes: Dict[str, List[Any]], baseline: Optional[Dict[str, Any]]
    ) -> Optional[Dict[str, Any]]:
        start = dict(baseline or {axis: values[0] for axis, values in axes.items()})
        if self.launchable(start) is not None:
            return start
        # The baseline itself is refused: start from the first valid config instead.
        return dict(self.configs[self.valid[0]]["point"]) if self.valid else None


def one_axis_at_a_time(
    plan: Dict[str, Any],
    scores: Scoreboard,
    axes: Dict[str, List[Any]],
    baseline: Optional[Dict[str, Any]] = None,
    best_values: Optional[Dict[str, Any]] = None,
    only: Optional[Dict[str, List[Any]]] = None,
) -> Iterator[str]:
    """From a baseline, vary one axis at a time, the others at the baseline (auto_benchmark's
    first tier). ``best_values``, when given, receives each axis's best value; ``only``, when
    given, limits the values tried on each axis (the baseline's own is always measured)."""
    space = _Space(plan)
    start = space.start(axes, baseline)
    if start is None:
        return
    for axis, values in axes.items():
        tried: List[Tuple[Any, str]] = []
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
    plan: Dict[str, Any],
    scores: Scoreboard,
    axes: Dict[str, List[Any]],
    baseline: Optional[Dict[str, Any]] = None,
) -> Iterator[str]:
    best_values: Dict[str, Any] = {}
    yield from one_axis_at_a_time(plan, scores, axes, baseline, best_values)
    space = _Space(plan)
    start = space.start(axes, baseline)
    if start is None:
        return
    combined = space.launchable({**start, **best_values})
    if combined is not None and combined not in scores.results:
        yield combined


# adaptive: one score's error is taken as at least this (launch-to-launch noise, a few
# percent) or the model's misfit when larger (interactions); a config can still win when its
# prediction plus ADAPTIVE_Z such errors (scaled by how rarely its values were measured)
# beats the best score by more than ADAPTIVE_ERROR (the noise). A wide bound (z = 4) finds
# interactions a main-effects model cannot see; ADAPTIVE_BUDGET keeps it from launching most
# of a flat landscape: the model-guided launches stop once this share of the valid configs
# has been launched (the one-axis pass always runs whole). Chosen on landscapes seeded
# 1000-1049 and 2000-2049 of benchmarks/search_cost.py; docs/benchmarks.md reports seeds 0-49.
ADAPTIVE_ERROR = 0.03
ADAPTIVE_Z = 4.0
ADAPTIVE_BUDGET = 1.0 / 3.0
# Before declaring a winner, the best ADAPTIVE_FINALISTS fully measured configs within
# ADAPTIVE_FINAL_MARGIN of the best are launched again until each has ADAPTIVE_REPEATS
# launches, and the winner is the best pooled mean (``finals``).
ADAPTIVE_FINALISTS = 2
ADAPTIVE_REPEATS = 2
ADAPTIVE_FINAL_MARGIN = 0.03
# With a prior (earlier runs' values on the same hardware group) adaptive starts from the
# prior's best config, and an axis value the prior puts more than PRIOR_MARGIN behind the best
# value of its axis (here: 1.5x slower) is not tried. Chosen on the tuning seeds' second runs
# (docs/benchmarks.md: 0.25 misses more after drift, 1.0 costs 3 points more, finds no more).
PRIOR_MARGIN = 0.5


def adaptive_score(scores: Scoreboard, config_id: str) -> Optional[float]:
    """What ``adaptive`` compares configs by: the screening value (every adaptive launch has
    one, the same short workload for all), else the objective's value, as a log score."""
    value = scores.pooled(config_id, SCREEN)
    if value is None:
        value = scores.pooled(config_id)
    return None if value is None else strategy_model.score(value, scores.objective.goal)


def adaptive(
    plan: Dict[str, Any],
    scores: Scoreboard,
    axes: Dict[str, List[Any]],
    baseline: Optional[Dict[str, Any]] = None,
    error: Optional[float] = None,
    z: Optional[float] = None,
    finalists: Optional[int] = None,
    repeats: Optional[int] = None,
    margin: Optional[float] = None,
    prior: Optional[Dict[str, float]] = None,
    prior_margin: Optional[float] = None,
    budget: Optional[float] = None,
) -> Iterator[str]:
    """One axis at a time from the baseline, then model-guided launches until no config
    left can beat the best measured one by more than the noise.

    After each launch a main-effects model (strategy_model) is fitted to every score so
    far. Each config not launched yet gets an optimistic bound: its prediction plus ``z``
    errors of one score (``error``, or the model's misfit when larger) times the model's
    spread for its values. The next launch is the config with the highest bound (one with
    a value never measured comes first: nothing is known of it); the search stops when no
    bound beats the best measured score by more than ``error``, or once ``budget`` (a share)
    of the valid configs has been launched. Every decision reads only
    the scoreboard, in plan order: a resumed sweep decides the same, whatever order the
    results file holds its lines in.
    """
    error = ADAPTIVE_ERROR if error is None else error
    z = ADAPTIVE_Z if z is None else z
    finalists = ADAPTIVE_FINALISTS if finalists is None else finalists
    repeats = ADAPTIVE_REPEATS if repeats is None else repeats
    margin = ADAPTIVE_FINAL_MARGIN if margin is None else margin
    budget = ADAPTIVE_BUDGET if budget is None else budget
    space = _Space(plan)
    names = list(axes)
    plausible: Optional[Dict[str, List[Any]]] = None
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
    yield from one_axis_at_a_time(plan, scores, axes, baseline, only=plausible)
    while True:
        observations = []
        incumbent: Optional[float] = None
        untested: List[str] = []
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
        model = strategy_model.MainEffects(len(names), observations)
        one_error = max(math.log1p(error), model.misfit())
        chosen, chosen_bound = None, None
        for config_id in untested:
            levels = strategy_model.levels_of(space.configs[config_id]["point"], names)
            prediction = model.predict(levels)
            if prediction is None:  # a value never measured: nothing to predict with
                chosen, chosen_bound = config_id, None
                break
            bound = prediction + z * one_error * model.spread(levels)
            if chosen_bound is None or bound > chosen_bound:
                chosen, chosen_bound = config_id, bound
        if chosen is None:
            break
        # The budget bounds the search for a better config, not for a working one.
        launched = sum(config_id in scores.results for config_id in space.valid)
        if incumbent is not None and launched >= budget * len(space.valid):
            break
        # An underdetermined model (a failed launch left fewer scores than effects) bounds
        # nothing: keep launching its best guess until it is determined.
        if (
            chosen_bound is not None
            and incumbent is not None
            and model.dof >= 0
            and chosen_bound <= incumbent + math.log1p(error)
        ):
            break
        yield chosen
    yield from finals(space.valid, scores, finalists, repeats, margin)


def _prior_scores(space: "_Space", prior: Dict[str, float], goal: str) -> Dict[str, float]:
    """config id -> log score of the prior's values for the configs this plan can launch."""
    return {
        config_id: strategy_model.score(float(value), goal)
        for config_id, value in prior.items()
        if config_id in space.valid_set and value is not None and float(value) > 0
    }


def _plausible_values(
    space: "_Space",
    names: List[str],
    axes: Dict[str, List[Any]],
    known: Dict[str, float],
    margin: float,
) -> Dict[str, List[Any]]:
    """Per axis, the values a main-effects fit of the prior does not put more than
    ``margin`` behind the axis's best value, and the values the prior never measured."""
    observations = [
        (strategy_model.levels_of(space.configs[c]["point"], names), known[c]) for c in sorted(known)
    ]
    model = strategy_model.MainEffects(len(names), observations)
    plausible: Dict[str, List[Any]] = {}
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
    valid: List[str], scores: Scoreboard, finalists: int, repeats: int, margin: float
) -> Iterator[str]:
    """Re-measure the best fully measured configs before a winner is declared.

    The finalists are the best ``finalists`` configs by pooled objective value (the mean
    over their launches, as ``pick_best`` ranks them) that are within ``margin`` of the
    best: one launch cannot tell them apart. Each is launched again until it has
    ``repeats`` launches; the ranking is read again after each launch, so a config that a
    re-measure lifts into the finals is re-measured too, up to ``finalists x (repeats - 1)``
    re-measures in all. A function of the scoreboard: a
    resumed sweep re-measures what is still missing, nothing twice.
    """
    if finalists < 2 or repeats < 2:
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
        best = -ranked[0][0]
        contenders = [c for s, c in ranked[:finalists] if -s >= best - math.log1p(margin)]
        if len(contenders) < 2:
            return
        missing = [c for c in contenders if scores.launches(c) < repeats]
        # At most finalists x (repeats - 1) re-measures in all: on a flat landscape every
        # re-measure would otherwise lift another config into the finals.
        done = sum(max(scores.launches(c) - 1, 0) for c in valid)
        if not missing or done >= finalists * (repeats - 1):
            return
        yield missing[0]


def planned_launches(
    plan: Dict[str, Any],
    axes: Optional[Dict[str, List[Any]]] = None,
    baseline: Optional[Dict[str, Any]] = None,
) -> Dict[str, Tuple[int, int]]:
    """The fewest and the most launches each strategy can make on a plan, before any result
    (adaptive's most: when some launch succeeds; while every launch fails it goes on).

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
    remeasures = ADAPTIVE_FINALISTS * (ADAPTIVE_REPEATS - 1) if searched >= 2 else 0
    return {
        "grid": (valid, valid),
        "coordinate": (first_pass, min(first_pass + 1, valid)),
        "screen": (valid, valid),
        "adaptive": (first_pass, searched + remeasures),
    }


def run_order(
    strategy: str,
    plan: Dict[str, Any],
    scores: Scoreboard,
    axes: Dict[str, List[Any]],
    baseline: Optional[Dict[str, Any]] = None,
    prior: Optional[Dict[str, float]] = None,
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
