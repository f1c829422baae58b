# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A main-effects model of a sweep's landscape, for the ``adaptive`` strategy.

Speed is close to a product of per-axis factors (a faster MoE runner makes every config
faster by about the same ratio), so the model is additive in log space:
``score(point) = mu + sum over axes of effect[axis][value]``, fitted by least squares
(backfitting) to the scores measured so far. Its residuals say how far the landscape is
from that shape (interactions plus noise); the strategy widens its stopping margin by them.

Pure functions of the observations, in the order given: the same results give the same
model, so a resumed sweep makes the same decisions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

Levels = tuple[str, ...]  # one value key per axis, in axis order

# Backfitting converges geometrically for a main-effects design; this many sweeps over the
# axes is far beyond what the largest real matrix (a few axes, a few values each) needs.
FIT_ITERATIONS = 200


def score(value: float, goal: str) -> float:
    """Log of a metric, signed so that higher is better whatever the goal."""
    logged = math.log(max(value, 1e-12))
    return logged if goal == "max" else -logged


class MainEffects:
    """Least-squares fit of ``mu + sum(effect[axis][level])`` to (levels, score) pairs."""

    def __init__(self, n_axes: int, observations: Sequence[tuple[Levels, float]]) -> None:
        self.n_axes = n_axes
        self.n = len(observations)
        self.mu = math.fsum(y for _levels, y in observations) / self.n if observations else 0.0
        self.effects: list[dict[str, float]] = [{} for _axis in range(n_axes)]
        counts: list[dict[str, int]] = [{} for _axis in range(n_axes)]
        for levels, _y in observations:
            for axis, level in enumerate(levels):
                counts[axis][level] = counts[axis].get(level, 0) + 1
                self.effects[axis].setdefault(level, 0.0)
        for _sweep in range(FIT_ITERATIONS):
            for axis in range(n_axes):
                sums: dict[str, float] = {}
                for levels, y in observations:
                    rest = self.mu + sum(self.effects[a][levels[a]] for a in range(n_axes) if a != axis)
                    sums[levels[axis]] = sums.get(levels[axis], 0.0) + (y - rest)
                self.effects[axis] = {level: sums[level] / counts[axis][level] for level in sums}
        self.counts = counts
        self.residuals = [y - self._fitted(levels) for levels, y in observations]
        parameters = 1 + sum(max(len(c) - 1, 0) for c in counts)
        self.dof = self.n - parameters

    def _fitted(self, levels: Levels) -> float:
        return self.mu + sum(self.effects[a][levels[a]] for a in range(self.n_axes))

    def predict(self, levels: Levels) -> float | None:
        """The model's score for a point; None when one of its values was never measured."""
        if any(levels[a] not in self.effects[a] for a in range(self.n_axes)):
            return None
        return self._fitted(levels)

    def spread(self, levels: Levels) -> float:
        """How uncertain a prediction is, in units of one observation's error: each effect
        is a mean over the scores that had its value, so rarely measured values weigh most."""
        return math.sqrt(sum(1.0 / self.counts[a][levels[a]] for a in range(self.n_axes)))

    def misfit(self) -> float:
        """Root-mean-square residual per degree of freedom (0 while the fit is saturated)."""
        if self.dof <= 0:
            return 0.0
        return math.sqrt(math.fsum(r * r for r in self.residuals) / self.dof)


def levels_of(point: dict[str, Any], axes: Sequence[str]) -> Levels:
    return tuple(repr(point.get(axis)) for axis in axes)
