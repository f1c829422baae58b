"""E-divisive means change points, and attribution to the stack component that changed."""

from __future__ import annotations

import itertools
import random
import statistics

from history_lines import launch_values

from bwtune import regression


def nightly(levels: list[float], seed: int = 3, cv: float = 0.007) -> list[float]:
    rng = random.Random(seed)
    return [level * rng.gauss(1.0, cv) for level in levels]


def test_a_step_is_found_where_it_happened() -> None:
    series = nightly([100.0] * 8 + [90.0] * 6)
    assert regression.e_divisive(series) == [8]


def test_a_flat_history_has_no_change_point() -> None:
    assert regression.e_divisive(nightly([100.0] * 14, seed=4)) == []


def test_a_slow_drift_is_caught_by_the_change_point_not_by_night_to_night_comparisons() -> None:
    rng = random.Random(7)
    levels = [1000.0] * 10 + [1000.0 * (1 - 0.02 * k) for k in range(1, 6)]
    nights = [[launch_values(level, rng) for _ in range(8)] for level in levels]
    # Each night against the night before: every step is under the 3% minimum effect.
    verdicts = [
        regression.compare(a, b, metric="t", goal="max").verdict for a, b in itertools.pairwise(nights)
    ]
    assert regression.REGRESSION not in verdicts
    # The history's level moved, and the change point says from where.
    points = [
        regression.HistoryPoint(
            f"n{i}", f"2026-11-{i + 1:02d}", statistics.median(v for launch in night for v in launch)
        )
        for i, night in enumerate(nights)
    ]
    found = regression.change_points(points, "max")
    assert found and found[-1].verdict == regression.REGRESSION
    assert 10 <= found[-1].index <= 13 and found[-1].change < -0.03


def test_seeded_permutations_give_the_same_answer() -> None:
    series = nightly([100.0] * 6 + [95.0] * 6, seed=6)
    assert regression.e_divisive(series, seed=1) == regression.e_divisive(series, seed=1)


def test_attribution_names_only_the_components_that_changed() -> None:
    good = {"stack": {"torch": "2.11.0.dev20261127", "sglang_commit": "aaa", "flashinfer": "0.5.3"}}
    bad = {"stack": {"torch": "2.11.0.dev20261128", "sglang_commit": "aaa", "flashinfer": "0.5.3"}}
    changed = regression.changed_components(good, bad)
    assert [(c["component"], c["before"], c["after"]) for c in changed] == [
        ("torch", "2.11.0.dev20261127", "2.11.0.dev20261128")
    ]
    assert regression.attribution_text(changed) == "torch 2.11.0.dev20261127 -> 2.11.0.dev20261128"


def test_attribution_without_recorded_components_falls_back_to_the_fingerprint() -> None:
    changed = regression.changed_components({"stack_fingerprint": "aaa"}, {"stack_fingerprint": "bbb"})
    assert changed == [{"component": "stack_fingerprint", "name": "stack (components not recorded)",
                        "before": "aaa", "after": "bbb"}]  # fmt: skip
    assert regression.changed_components({"stack_fingerprint": "aaa"}, {"stack_fingerprint": "aaa"}) == []
