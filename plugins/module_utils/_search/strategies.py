# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
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

This module is the registry (the names, ``run_order``) and the one name of the strategies'
public API, re-exporting it. The code lives in strategy_scores (the objective, the
scoreboard, the measured launch noise), strategy_finals (re-measuring the leaders),
strategy_screening (the screening workload and its gate), strategy_one_axis (``grid``,
``coordinate``, the one-axis pass), strategy_adaptive (``adaptive``, ``is_flat``, its budget
and prior) and strategy_launches (what ``bwtune plan`` announces).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_adaptive import (
    ADAPTIVE_BUDGET,
    PRIOR_MARGIN,
    adaptive,
    is_flat,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_finals import (
    FINALISTS,
    REMEASURES,
    REPEATS,
    finals,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_launches import (
    launches_while_nothing_runs,
    planned_launches,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_one_axis import (
    coordinate,
    grid,
    one_axis_at_a_time,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_scores import (
    Objective,
    Scoreboard,
    launch_noise,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_screening import (
    SCREEN,
    SCREENING,
    needs_screen,
    screen_gate,
    screen_passes,
    screen_workload,
)

__all__ = [
    "ADAPTIVE_BUDGET",
    "FINALISTS",
    "PRIOR_MARGIN",
    "REMEASURES",
    "REMEASURING",
    "REPEATS",
    "SCREEN",
    "SCREENING",
    "STRATEGIES",
    "Objective",
    "Scoreboard",
    "adaptive",
    "coordinate",
    "finals",
    "grid",
    "is_flat",
    "launch_noise",
    "launches_while_nothing_runs",
    "needs_screen",
    "one_axis_at_a_time",
    "planned_launches",
    "run_order",
    "screen_gate",
    "screen_passes",
    "screen_workload",
]

# The names are the contract's (the CLI and the module offer the same choices).
STRATEGIES = results_contract.STRATEGIES
# Strategies that may name a measured config again (a re-measure, ``finals``) and leave out
# by themselves what the scoreboard already holds: the sweep launches every id they name.
# Every strategy re-measures a winner whose lead is within the measured noise (``finals``).
REMEASURING = ("grid", "coordinate", "screen", "adaptive")


def run_order(
    strategy: str,
    plan: dict[str, Any],
    scores: Scoreboard,
    axes: dict[str, list[Any]],
    baseline: dict[str, Any] | None = None,
    prior: dict[str, float] | None = None,
) -> Iterator[str]:
    """The config ids to launch, one at a time; ``scores`` must be updated between steps.
    ``prior`` (config id -> value measured by earlier runs) guides ``adaptive`` only, with
    this module's PRIOR_MARGIN (read at each call: the registry's setting)."""
    if strategy == "coordinate":
        return coordinate(plan, scores, axes, baseline)
    if strategy == "adaptive":
        return adaptive(plan, scores, axes, baseline, prior=prior, prior_margin=PRIOR_MARGIN)
    if strategy in ("grid", "screen"):
        return grid(plan, scores)
    raise ValueError("unknown strategy %r (expected one of %s)" % (strategy, ", ".join(STRATEGIES)))
