"""adaptive on what issue 24's stress families measure: a flat top (every config as fast as
the noise lets one config's launches be) spends the finals' re-measures on untested configs,
within the announced budget; when most launches failed, the failures do not leave a config
out; a sweep killed while it explores past its budget resumes to the same launches."""

from __future__ import annotations

import math
import random
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategies import Scoreboard
from tests.unit.sweep.test_search_adaptive import AXES, drive, make_plan, objective, point_of


def test_is_flat_compares_the_spread_of_configs_with_the_launch_noise() -> None:
    rng = random.Random(4)
    alike = [math.log(50.0 * rng.gauss(1.0, 0.02)) for _ in range(12)]
    apart = [math.log(50.0 * rng.gauss(1.0, 0.10)) for _ in range(12)]
    assert strategies.is_flat(alike, 0.02)
    assert not strategies.is_flat(apart, 0.02)
    assert strategies.is_flat(apart, 0.12), "the same spread is flat at a noise that large"
    assert not strategies.is_flat(alike[:2], 0.02), "two configs say nothing of a spread"


def _flat(point: dict[str, Any]) -> float | None:
    return 50.0


def test_a_peak_on_a_flat_top_past_the_budget_is_launched_in_the_finals_place() -> None:
    """Issue 24's plateau-peak: every config alike, one 8% higher, not among the configs the
    budget reaches. The top is flat, so the re-measures go to untested configs and find it;
    the launches in all stay within what `bwtune plan` announces."""
    plan = make_plan()
    cap = math.ceil(strategies.ADAPTIVE_BUDGET * len(plan["launches"]))
    flat, _scores = drive(plan, _flat)
    distinct = list(dict.fromkeys(flat))
    assert len(distinct) == cap + strategies.REMEASURES
    peak = point_of(plan, distinct[cap + 1])

    def plateau(point: dict[str, Any]) -> float | None:
        return 54.0 if point == peak else 50.0

    launched, scores = drive(plan, plateau)
    assert point_of(plan, scores.best() or "") == peak
    assert len(launched) <= strategies.planned_launches(plan, AXES)["adaptive"][1]


def test_a_landscape_that_is_not_flat_keeps_its_finals() -> None:
    """Configs 10% apart or more are not a flat top: the search stops at its budget or its
    bounds, as before, and the finals keep their re-measures."""
    plan = make_plan()
    valid = len(plan["launches"])
    cap = math.ceil(strategies.ADAPTIVE_BUDGET * valid)

    def steep(point: dict[str, Any]) -> float | None:
        n = next(i for i, c in enumerate(plan["configs"]) if c["point"] == point)
        return 50.0 * 1.1 ** (n % 7)

    launched, _scores = drive(plan, steep)
    assert len(set(launched)) <= cap


def test_when_most_launches_fail_a_value_seen_only_failing_is_still_tried() -> None:
    """Issue 24's mostly-failing: all but two configs fail. Every value then has failed more
    often than it ran; before, that left every untested config out and the search stopped
    short of its budget (and of the better working config)."""
    plan = make_plan()
    cap = math.ceil(strategies.ADAPTIVE_BUDGET * len(plan["launches"]))
    found = 0
    for seed in range(12):
        rng = random.Random(seed)
        ids = [launch["config"] for launch in plan["launches"]]
        working = {cid: 40.0 + 10.0 * n for n, cid in enumerate(rng.sample(ids, 2))}
        points = {cid: point_of(plan, cid) for cid in working}

        def speed(
            point: dict[str, Any], working: dict[str, float] = working, points: dict[str, Any] = points
        ) -> float | None:
            return next((working[c] for c, p in points.items() if p == point), None)

        launched, scores = drive(plan, speed)
        distinct = set(launched)
        if any(c in distinct for c in working):
            assert len(distinct) >= cap, (seed, len(distinct))
        found += scores.best() == max(working, key=lambda c: working[c])
    assert found >= 3


def test_a_sweep_killed_while_it_explores_a_flat_top_resumes_to_the_same_launches() -> None:
    plan = make_plan()
    whole, _ = drive(plan, _flat)
    cap = math.ceil(strategies.ADAPTIVE_BUDGET * len(plan["launches"]))
    for stop_after in (cap - 1, cap + 2, cap + strategies.REMEASURES - 1):
        first, killed = drive(plan, _flat, stop_after=stop_after)
        lines = [line for history in killed.history.values() for line in history]
        random.Random(stop_after).shuffle(lines)
        resumed = Scoreboard(objective())
        for line in lines:
            resumed.record(line)
        rest, _ = drive(plan, _flat, scores=resumed)
        assert first + rest == whole, f"killed after {stop_after} launches"
