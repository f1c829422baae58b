# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""What a sweep's strategies read: the objective, the scoreboard of results so far, and the
launch-to-launch noise this run measured (split from strategies.py, which re-exports them)."""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract


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


def launch_logs(scores: Scoreboard, config_id: str) -> list[float]:
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
        o_ss, o_dof = _sum_squares(launch_logs(scores, other))
        ss, dof = ss + o_ss, dof + o_dof
    pooled = max(NOISE_FLOOR, math.sqrt(ss / dof))
    if config_id is None:
        return pooled
    own_ss, own_dof = _sum_squares(launch_logs(scores, config_id))
    if own_dof == 0:
        return pooled
    own = math.sqrt((pooled * pooled * NOISE_PRIOR_DOF + own_ss) / (NOISE_PRIOR_DOF + own_dof))
    return max(pooled, own)
