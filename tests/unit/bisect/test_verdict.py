"""A step's verdict against both ends, with regression.compare: good-like, bad-like, and
undecided for a level between the ends or a step inside the noise."""

from __future__ import annotations

import random

from bwtune.bisect.verdict import BAD_LIKE, GOOD_LIKE, UNDECIDED, judge


def launches(level: float, n: int, seed: int, noise: float = 0.02) -> list[list[float]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        mean = level * (1 + rng.gauss(0, noise))
        out.append([mean * (1 + rng.gauss(0, 0.005)) for _ in range(3)])
    return out


GOOD_END, BAD_END = launches(100, 3, 1), launches(80, 3, 2)


def verdict(step: list[list[float]]) -> str:
    return judge(GOOD_END, BAD_END, step, metric="output_throughput", goal="max").verdict


def test_a_step_at_the_good_level_is_good_like() -> None:
    assert verdict(launches(100, 3, 3)) == GOOD_LIKE


def test_a_step_at_the_bad_level_is_bad_like() -> None:
    assert verdict(launches(80, 3, 4)) == BAD_LIKE


def test_a_level_between_the_ends_is_undecided_however_many_launches() -> None:
    assert verdict(launches(90, 3, 5)) == UNDECIDED
    assert verdict(launches(90, 9, 5)) == UNDECIDED


def test_one_sample_decides_nothing() -> None:
    assert verdict([[80.0]]) == UNDECIDED  # fewer than 2 samples


def test_lower_is_better_metrics_turn_the_verdicts_round() -> None:
    good, bad = launches(10, 3, 7), launches(13, 3, 8)
    step = launches(13, 3, 9)
    assert judge(good, bad, step, metric="median_itl_ms", goal="min").verdict == BAD_LIKE
