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
  statistically worse than the best screening result so far (see ``screen_passes``).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract

# The names are the contract's (the CLI and the module offer the same choices).
STRATEGIES = results_contract.STRATEGIES


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
        self.results: Dict[str, Dict[str, Any]] = {}

    def record(self, result: Dict[str, Any]) -> None:
        self.results[result["config_id"]] = result

    def value(self, config_id: str) -> Optional[float]:
        result = self.results.get(config_id)
        return self.objective.value(result) if result else None

    def best(self, config_ids: Optional[List[str]] = None) -> Optional[str]:
        """The best config among `config_ids` (all recorded when None), by the contract's rule."""
        ids = config_ids if config_ids is not None else list(self.results)
        lines = [self.results[i] for i in ids if i in self.results]
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


def _valid_ids(plan: Dict[str, Any]) -> List[str]:
    return [launch["config"] for launch in plan.get("launches", [])]


def grid(plan: Dict[str, Any], scores: Scoreboard) -> Iterator[str]:
    yield from _valid_ids(plan)


def _point_key(point: Dict[str, Any]) -> Tuple[Tuple[str, str], ...]:
    return tuple(sorted((axis, repr(value)) for axis, value in point.items()))


def coordinate(
    plan: Dict[str, Any],
    scores: Scoreboard,
    axes: Dict[str, List[Any]],
    baseline: Optional[Dict[str, Any]] = None,
) -> Iterator[str]:
    configs = {c["id"]: c for c in plan.get("configs", [])}
    by_point = {_point_key(c["point"]): c for c in configs.values()}
    valid = set(_valid_ids(plan))

    def launchable(point: Dict[str, Any]) -> Optional[str]:
        """The id to launch for a matrix point (following duplicates), or None if it can't run."""
        config = by_point.get(_point_key(point))
        while config is not None and config.get("status") == "duplicate":
            config = configs.get(config.get("duplicate_of") or "")
        return config["id"] if config is not None and config["id"] in valid else None

    start = dict(baseline or {axis: values[0] for axis, values in axes.items()})
    if launchable(start) is None:
        # The baseline itself is refused: start from the first valid config instead.
        first = next((configs[i] for i in _valid_ids(plan)), None)
        if first is None:
            return
        start = dict(first["point"])

    best_value_of_axis: Dict[str, Any] = {}
    for axis, values in axes.items():
        tried: List[Tuple[Any, str]] = []
        for value in values:
            config_id = launchable({**start, axis: value})
            if config_id is None:
                continue
            if config_id not in scores.results:
                yield config_id
            tried.append((value, config_id))
        winner = scores.best([config_id for _value, config_id in tried])
        best_value_of_axis[axis] = next((v for v, c in tried if c == winner), start[axis])

    combined = launchable({**start, **best_value_of_axis})
    if combined is not None and combined not in scores.results:
        yield combined


def run_order(
    strategy: str,
    plan: Dict[str, Any],
    scores: Scoreboard,
    axes: Dict[str, List[Any]],
    baseline: Optional[Dict[str, Any]] = None,
) -> Iterator[str]:
    """The config ids to launch, one at a time; ``scores`` must be updated between steps."""
    if strategy == "coordinate":
        return coordinate(plan, scores, axes, baseline)
    if strategy in ("grid", "screen"):
        return grid(plan, scores)
    raise ValueError("unknown strategy %r (expected one of %s)" % (strategy, ", ".join(STRATEGIES)))


ScreenCheck = Callable[[Dict[str, Any]], bool]
