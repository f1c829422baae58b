from __future__ import annotations

import math

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import student_t
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_contract import mean_ci95


@pytest.mark.parametrize(
    ("q", "df", "expected"),
    [(0.975, 2, 4.302653), (0.975, 10, 2.228139), (0.95, 1, 6.313752), (0.5, 7, 0.0), (0.025, 30, -2.042272)],
)
def test_t_quantiles_match_tables(q: float, df: float, expected: float) -> None:
    assert student_t.t_ppf(q, df) == pytest.approx(expected, abs=1e-5)


def test_t_cdf_known_values() -> None:
    assert student_t.t_cdf(2.0, 5) == pytest.approx(0.949030, abs=1e-6)
    assert student_t.t_cdf(-1.0, 1) == pytest.approx(0.25, abs=1e-12)  # Cauchy
    assert student_t.t_cdf(0.0, 3) == pytest.approx(0.5)


def test_mean_ci95() -> None:
    _mean, (low, high), _cv = mean_ci95([10.0, 12.0, 14.0])
    assert (low, high) == pytest.approx((12 - 4.302653 * 2 / math.sqrt(3), 12 + 4.302653 * 2 / math.sqrt(3)))
    assert mean_ci95([1.0])[1] is None
