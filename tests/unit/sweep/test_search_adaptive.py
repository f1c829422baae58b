"""The adaptive strategy: what it launches, when it stops, and that a resumed sweep decides the same."""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections.abc import Callable
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils import strategy_model
from ansible_collections.bwtune.sglang.plugins.module_utils.strategies import (
    SCREEN,
    Objective,
    Scoreboard,
    run_order,
    screen_gate,
)

AXES = {"moe": ["a", "b", "c"], "gemm": ["x", "y", "z"], "attn": ["f", "t", "m"], "spec": ["none", "mtp"]}
# Separable: each value multiplies the speed; the best is (b, z, m, mtp), far from the baseline.
FACTOR = {"a": 1.0, "b": 1.3, "c": 0.7, "x": 1.0, "y": 0.9, "z": 1.1, "f": 1.0, "t": 0.6, "m": 1.05}
FACTOR.update({"none": 1.0, "mtp": 2.0})

Speed = Callable[[dict[str, Any]], float | None]


def make_plan(pruned: Callable[[dict[str, Any]], bool] = lambda p: False) -> dict[str, Any]:
    configs, launches = [], []
    for n, values in enumerate(itertools.product(*AXES.values())):
        point = dict(zip(AXES, values, strict=True))
        status = "pruned" if pruned(point) else "valid"
        configs.append({"id": f"c{n:010d}", "point": point, "status": status})
        if status == "valid":
            launches.append({"config": f"c{n:010d}", "workloads": [{"name": "single"}]})
    return {"configs": configs, "launches": launches}


def separable(point: dict[str, Any]) -> float | None:
    return 50.0 * math.prod(FACTOR[v] for v in point.values())


def noise(config_id: str) -> float:
    """A fixed launch-to-launch factor per config (within 1%), so a replay measures the same."""
    return 1.0 + (int(hashlib.sha256(config_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF - 0.5) / 50


def measure(plan: dict[str, Any], config_id: str, speed: Speed) -> dict[str, Any]:
    """The line the sweep records for an adaptive launch: a screen of 3 repetitions, then the
    objective's workload (a failed config has no metrics)."""
    point = next(c["point"] for c in plan["configs"] if c["id"] == config_id)
    value = speed(point)
    if value is None:
        return {"config_id": config_id, "host": "n1", "status": "crashed", "metrics": {}}
    value *= noise(config_id)
    screen = {"values": {"tok": value}, "ci95": {"tok": [value * 0.995, value * 1.005]}, "n": 3}
    metrics = {SCREEN: screen, "single": {"values": {"tok": value}, "n": 1}}
    return {"config_id": config_id, "host": "n1", "status": "ok", "metrics": metrics}


def objective(goal: str = "max") -> Objective:
    return Objective("single", "tok", goal)


def drive(
    plan: dict[str, Any], speed: Speed, scores: Scoreboard | None = None, stop_after: int | None = None
) -> tuple[list[str], Scoreboard]:
    """Run adaptive like the node's sweep: launch, record, resume the generator."""
    scores = scores or Scoreboard(objective())
    resumed = set(scores.results)
    launched: list[str] = []
    for config_id in run_order("adaptive", plan, scores, AXES):
        if config_id in resumed:  # the sweep skips what the results file already has
            continue
        if stop_after is not None and len(launched) == stop_after:
            break  # the sweep is killed before this launch
        launched.append(config_id)
        scores.record(measure(plan, config_id, speed))
    return launched, scores


def point_of(plan: dict[str, Any], config_id: str) -> dict[str, Any]:
    return next(c["point"] for c in plan["configs"] if c["id"] == config_id)


def true_best(plan: dict[str, Any], speed: Speed) -> dict[str, Any]:
    valid = [point_of(plan, launch["config"]) for launch in plan["launches"]]
    return max((p for p in valid if speed(p) is not None), key=lambda p: speed(p) or 0.0)


def test_a_separable_landscape_is_solved_with_a_fraction_of_the_launches() -> None:
    plan = make_plan()
    launched, scores = drive(plan, separable)
    assert len(launched) == len(set(launched)), "no config is launched twice"
    assert len(launched) <= len(plan["launches"]) // 4  # 54 valid configs
    assert point_of(plan, scores.best() or "") == {"moe": "b", "gemm": "z", "attn": "m", "spec": "mtp"}


def test_an_interaction_the_model_misses_widens_the_search_until_it_is_found() -> None:
    """gemm z with attention m is 0.6x together: the one-axis-at-a-time pass sees two
    winners, the model predicts their combination best, and the measurement contradicts it.
    The model's misfit must widen the search to the true best instead of stopping there."""

    def interacting(point: dict[str, Any]) -> float | None:
        base = separable(point) or 0.0
        return base * (0.6 if (point["gemm"], point["attn"]) == ("z", "m") else 1.0)

    plan = make_plan()
    launched, scores = drive(plan, interacting)
    best = true_best(plan, interacting)
    assert (best["gemm"], best["attn"]) != ("z", "m")
    assert point_of(plan, scores.best() or "") == best
    assert len(launched) < len(plan["launches"]) // 2


@pytest.mark.parametrize("stop_after", [1, 4, 7, 8, 9])
def test_a_killed_sweep_resumes_to_the_same_decisions(stop_after: int) -> None:
    """Decisions are a function of the results file: kill after n launches, start a new
    generator on the recorded lines (as the sweep's resume does), and the launches that
    follow are the ones the uninterrupted sweep made."""

    def lumpy(point: dict[str, Any]) -> float | None:
        base = separable(point) or 0.0
        return base * (1.4 if (point["moe"], point["spec"]) == ("c", "mtp") else 1.0)

    plan = make_plan()
    whole, _ = drive(plan, lumpy)
    assert len(whole) > 9, "the kill points cover the one-axis pass and the model's launches"
    first, killed = drive(plan, lumpy, stop_after=stop_after)
    assert first == whole[:stop_after]
    lines = list(killed.results.values())
    random.Random(stop_after).shuffle(lines)  # the file's order (hosts, retries) must not matter
    resumed = Scoreboard(objective())
    for line in lines:
        resumed.record(line)
    rest, _ = drive(plan, lumpy, scores=resumed)
    assert first + rest == whole


def test_a_value_whose_launch_failed_is_tried_in_another_config() -> None:
    """The one-axis pass tries attention m once; it crashes there. Nothing is known about m,
    so another config with m is launched (here m is the best value)."""

    def m_crashes_at_baseline(point: dict[str, Any]) -> float | None:
        if point == {"moe": "a", "gemm": "x", "attn": "m", "spec": "none"}:
            return None
        return separable(point)

    plan = make_plan()
    launched, scores = drive(plan, m_crashes_at_baseline)
    tried_m = [c for c in launched if point_of(plan, c)["attn"] == "m"]
    assert len(tried_m) >= 2
    assert point_of(plan, scores.best() or "") == {"moe": "b", "gemm": "z", "attn": "m", "spec": "mtp"}


def test_pruned_points_are_never_launched_and_a_refused_baseline_is_replaced() -> None:
    plan = make_plan(pruned=lambda p: p["moe"] == "a" and p["gemm"] == "x")  # the baseline too
    launched, scores = drive(plan, separable)
    valid = {launch["config"] for launch in plan["launches"]}
    assert launched and set(launched) <= valid
    assert point_of(plan, scores.best() or "") == {"moe": "b", "gemm": "z", "attn": "m", "spec": "mtp"}


def test_when_every_launch_fails_each_config_is_launched_once_and_nothing_wins() -> None:
    plan = make_plan()
    launched, scores = drive(plan, lambda point: None)
    assert sorted(launched) == sorted(launch["config"] for launch in plan["launches"])
    assert scores.best() is None


def test_goal_min_searches_for_the_smallest_value() -> None:
    def latency(point: dict[str, Any]) -> float | None:
        return 1000.0 / (separable(point) or 1.0)

    plan = make_plan()
    scores = Scoreboard(objective("min"))
    launched, scores = drive(plan, latency, scores=scores)
    assert point_of(plan, scores.best() or "") == {"moe": "b", "gemm": "z", "attn": "m", "spec": "mtp"}
    assert len(launched) < len(plan["launches"]) // 2


def test_screen_gate_compares_with_the_best_screen_recorded_resumed_lines_included() -> None:
    scores = Scoreboard(objective())
    probe = {"values": {"tok": 55.0}, "ci95": {"tok": [50.0, 60.0]}}
    assert screen_gate(scores, probe), "the first screen always earns the full workloads"
    scores.record(
        {
            "config_id": "c1",
            "host": "n1",
            "status": "ok",
            "screened_out": True,
            "metrics": {SCREEN: {"values": {"tok": 105.0}, "ci95": {"tok": [100.0, 110.0]}}},
        }
    )
    assert not screen_gate(scores, probe), "wholly below the recorded best"
    assert screen_gate(scores, {"values": {"tok": 99.0}, "ci95": {"tok": [95.0, 101.0]}})


def test_main_effects_fit_recovers_an_additive_landscape_and_says_what_it_cannot_predict() -> None:
    effects = [{"a": 0.0, "b": 0.5}, {"x": 0.0, "y": -0.2, "z": 0.1}]
    observations = [
        ((a, b), 1.0 + effects[0][a] + effects[1][b])
        for a, b in [("a", "x"), ("b", "x"), ("a", "y"), ("a", "z")]
    ]
    model = strategy_model.MainEffects(2, observations)
    assert model.dof == 0 and model.misfit() == 0.0
    assert model.predict(("b", "z")) == pytest.approx(1.6)
    assert model.predict(("c", "z")) is None
    # b was measured once, a three times: a prediction with b is less certain.
    assert model.spread(("b", "x")) > model.spread(("a", "x"))
    noisy = [*observations, (("b", "z"), 1.9)]
    assert strategy_model.MainEffects(2, noisy).misfit() > 0.1


def test_a_flat_landscape_stops_once_nothing_can_win_by_more_than_the_noise() -> None:
    """No axis matters (every config within 1% of another): proving that must not cost the
    grid. (Stopping only when no bound reaches the best at all launches all 54 here.)"""
    plan = make_plan()
    launched, scores = drive(plan, lambda point: 50.0)
    assert len(launched) <= len(plan["launches"]) * 2 // 3
    assert scores.best() in launched
