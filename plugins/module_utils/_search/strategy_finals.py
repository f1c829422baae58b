# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""``finals``: re-measure the leaders while the best's lead is within the measured noise,
which every strategy ends with (split from strategies.py, which re-exports it)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategy_model
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_scores import (
    NOISE_Z,
    Scoreboard,
    launch_logs,
    launch_noise,
)

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
            return max(len(launch_logs(scores, config_id)), 1)

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
