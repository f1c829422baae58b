"""Verdicts of one comparison: each of the four, the failure rule, the goal's direction."""

from __future__ import annotations

import random

import pytest
from history_lines import launch_values

from bwtune import regression


def launches(level: float, n: int = 8, seed: int = 1, cv: float = 0.02) -> list[list[float]]:
    rng = random.Random(seed)
    return [launch_values(level, rng, cv=cv) for _ in range(n)]


def test_a_7_percent_slower_run_is_a_regression() -> None:
    verdict = regression.compare(
        launches(1000), launches(930, seed=2), metric="output_throughput", goal="max"
    )
    assert verdict.verdict == regression.REGRESSION
    assert verdict.change == pytest.approx(-0.07, abs=0.02)
    assert verdict.p_value is not None and verdict.p_value < 0.05


def test_a_faster_run_is_an_improvement_and_latency_goals_flip() -> None:
    faster = regression.compare(
        launches(1000), launches(1080, seed=2), metric="output_throughput", goal="max"
    )
    assert faster.verdict == regression.IMPROVEMENT
    # For a latency the same rise is a regression.
    slower = regression.compare(launches(1000), launches(1080, seed=2), metric="p99_itl_ms", goal="min")
    assert slower.verdict == regression.REGRESSION
    assert regression.goal_of("p99_itl_ms") == "min" and regression.goal_of("output_throughput") == "max"


def test_the_same_profile_is_no_change() -> None:
    verdict = regression.compare(
        launches(1000), launches(1000, seed=2), metric="output_throughput", goal="max"
    )
    assert verdict.verdict == regression.NO_CHANGE


def test_a_run_too_noisy_to_decide_is_inconclusive_never_a_regression() -> None:
    # 20% slower on average, but the run's own launches spread 25%: it decides nothing.
    noisy = launches(800, seed=2, cv=0.25)
    verdict = regression.compare(launches(1000), noisy, metric="output_throughput", goal="max")
    assert verdict.verdict == regression.INCONCLUSIVE
    assert "own noise" in verdict.note


def test_a_change_inside_the_launch_noise_is_inconclusive() -> None:
    # One launch a side but an earlier history that shows launches spread ~4%: a 5% move is
    # significant between the repetitions, large enough, and still not a regression.
    rng = random.Random(5)
    history = [[launch_values(1000, rng, cv=0.04)] for _ in range(6)]
    reference, candidate = [[1000.0, 1001.0, 999.0]], [[950.0, 951.0, 949.5]]
    verdict = regression.compare(reference, [*candidate, [951.0, 950.5, 949.0]],
                                 metric="output_throughput", goal="max", history=history)  # fmt: skip
    assert verdict.verdict == regression.INCONCLUSIVE and "within the noise" in verdict.note
    # The same numbers with quiet launches in the history are a regression.
    quiet = [[[1000.0 + i, 1000.5 + i, 999.5 + i]] for i in range(6)]
    decided = regression.compare(reference, [*candidate, [951.0, 950.5, 949.0]],
                                 metric="output_throughput", goal="max", history=quiet)  # fmt: skip
    assert decided.verdict == regression.REGRESSION


def test_below_the_minimum_effect_is_no_change_and_the_effect_is_configurable() -> None:
    reference, candidate = launches(1000), launches(980, seed=2)
    assert regression.compare(reference, candidate, metric="t", goal="max").verdict == regression.NO_CHANGE
    strict = regression.Settings(min_effect=0.005)
    assert regression.compare(reference, candidate, metric="t", goal="max", settings=strict).verdict in (
        regression.REGRESSION,
        regression.INCONCLUSIVE,
    )
    with pytest.raises(ValueError, match="--min-effect 3"):
        regression.Settings(min_effect=3).check()


def test_no_reference_is_inconclusive() -> None:
    verdict = regression.compare([], launches(1000), metric="t", goal="max")
    assert verdict.verdict == regression.INCONCLUSIVE and verdict.note == "no reference run"


def test_ok_then_failing_is_a_regression_with_its_failure_class() -> None:
    verdict = regression.status_verdict("output_throughput", "max", "ok", "oom")
    assert verdict is not None and verdict.verdict == regression.REGRESSION and verdict.failure_class == "oom"
    assert verdict.text() == "regression (oom)"
    back = regression.status_verdict("output_throughput", "max", "crashed", "ok")
    assert back is not None and back.verdict == regression.IMPROVEMENT
    assert regression.status_verdict("output_throughput", "max", "ok", "ok") is None
