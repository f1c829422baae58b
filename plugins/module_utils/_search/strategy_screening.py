# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The screening workload: a short version of the objective's workload that each launch of
``screen`` and ``adaptive`` starts with, and the gate that decides whether the full
workloads follow (split from strategies.py, which re-exports it)."""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import capacity_search
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_scores import (
    NOISE_Z,
    Scoreboard,
    launch_noise,
)

# Strategies whose launches start with the short screening workload (``screen_gate``).
SCREENING = ("screen", "adaptive")
SCREEN = results_contract.SCREEN_WORKLOAD


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


def needs_screen(strategy: str, scores: Scoreboard, config_id: str) -> bool:
    """Whether this launch starts with the screening workload: a screening strategy's first
    launch of a config does; a re-measure (``finals``) runs the full workloads only."""
    return strategy in SCREENING and scores.launches(config_id) == 0
