# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""How many launches each strategy can make on a plan before any result: what ``bwtune plan``
announces and the sweep never exceeds (split from strategies.py, which re-exports it)."""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_adaptive import ADAPTIVE_BUDGET
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_finals import REMEASURES
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_one_axis import (
    one_axis_at_a_time,
    valid_ids,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_scores import (
    Objective,
    Scoreboard,
)


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
    valid = len(valid_ids(plan))
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
    return len(valid_ids(plan))
