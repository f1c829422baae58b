# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The plan-order and one-axis strategies: ``grid`` (every valid config) and ``coordinate``
(one axis at a time from a baseline, then the best of each combined), with the plan's space
of points they walk (split from strategies.py, which re-exports them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_finals import (
    FINALISTS,
    REMEASURES,
    REPEATS,
    finals,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_scores import Scoreboard


def valid_ids(plan: dict[str, Any]) -> list[str]:
    return [launch["config"] for launch in plan.get("launches", [])]


def grid(plan: dict[str, Any], scores: Scoreboard) -> Iterator[str]:
    """Every valid config once, then ``finals``: a winner whose lead is within the measured
    noise is measured again (what the scoreboard holds already is not launched again)."""
    valid = valid_ids(plan)
    for config_id in valid:
        if config_id not in scores.results:
            yield config_id
    yield from finals(valid, scores, FINALISTS, REPEATS, REMEASURES)


def _point_key(point: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((axis, repr(value)) for axis, value in point.items()))


class Space:
    """The plan's matrix points and which config id launches each."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.configs = {c["id"]: c for c in plan.get("configs", [])}
        self.by_point = {_point_key(c["point"]): c for c in self.configs.values()}
        self.valid = valid_ids(plan)
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
    space = Space(plan)
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
    space = Space(plan)
    start = space.start(axes, baseline)
    if start is None:
        return
    combined = space.launchable({**start, **best_values})
    if combined is not None and combined not in scores.results:
        yield combined
    yield from finals(space.valid, scores, FINALISTS, REPEATS, REMEASURES)
