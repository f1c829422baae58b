from __future__ import annotations

import math
import sqlite3

import pytest
from sample_results import sample_results

from ansible_collections.bwtune.sglang.plugins.module_utils import student_t
from ansible_collections.bwtune.sglang.plugins.module_utils.results_contract import mean_ci95
from bwtune import regression, results_db

# Welch's example from the literature (Wikipedia, "Welch's t-test", example 3).
A = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
B = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]


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


def test_welch_matches_reference_example() -> None:
    result = regression.welch_t_test(A, B)
    assert result.statistic == pytest.approx(2.46, abs=0.01)
    assert result.df == pytest.approx(24.9, abs=0.1)
    assert result.p_value == pytest.approx(0.021, abs=0.001)


def test_welch_without_spread() -> None:
    assert regression.welch_t_test([5, 5], [5, 5]).p_value == 1.0
    assert regression.welch_t_test([5, 5], [6, 6]).p_value == 0.0
    with pytest.raises(ValueError, match="at least two"):
        regression.welch_t_test([1.0], [1.0, 2.0])


def test_bootstrap_agrees_with_welch_on_clear_and_null_cases() -> None:
    assert regression.bootstrap_test(A, B).p_value < 0.05
    assert regression.bootstrap_test(A, [x + 0.01 for x in A]).p_value > 0.5
    # Seeded: the same input gives the same p-value.
    assert regression.bootstrap_test(A, B, seed=3) == regression.bootstrap_test(A, B, seed=3)


def test_mean_ci95() -> None:
    _mean, (low, high), _cv = mean_ci95([10.0, 12.0, 14.0])
    assert (low, high) == pytest.approx((12 - 4.302653 * 2 / math.sqrt(3), 12 + 4.302653 * 2 / math.sqrt(3)))
    assert mean_ci95([1.0])[1] is None


@pytest.fixture
def two_runs(db: sqlite3.Connection) -> sqlite3.Connection:
    results_db.import_results(db, sample_results("base", seed=1))
    results_db.import_results(db, sample_results("same", seed=2))
    slow = sample_results("slow", seed=3, speed_scale=0.85)
    # One config stops working entirely in the slow run.
    slow[0].update(status="crashed", metrics={},
                   failure={"class": "crashed", "message": "segfault", "log_tail": ["boom"]})  # fmt: skip
    results_db.import_results(db, slow)
    return db


@pytest.mark.parametrize("method", ["welch", "bootstrap"])
def test_a_slower_run_is_flagged_config_by_config(two_runs: sqlite3.Connection, method: str) -> None:
    changes = regression.compare_runs(two_runs, "base", "slow", method=method)
    ok_keys = {(r["host"], r["config_id"]) for r in sample_results("base") if r["status"] == "ok"}
    flagged = {(c.host, c.config_id) for c in regression.regressions(changes)}
    assert flagged == ok_keys  # every ok config got 15% slower (one of them broke)
    crashed = next(c for c in changes if c.note == "status ok -> crashed")
    assert crashed.regressed
    measured = [c for c in changes if c.p_value is not None]
    assert all(c.relative_change == pytest.approx(-0.15, abs=0.04) for c in measured)
    assert not any(c.improved for c in changes)


def test_noise_alone_is_not_a_regression(two_runs: sqlite3.Connection) -> None:
    changes = regression.compare_runs(two_runs, "base", "same")
    assert [c for c in changes if c.p_value is not None]
    assert regression.regressions(changes) == []


def test_goal_min_flips_the_direction(two_runs: sqlite3.Connection) -> None:
    results_db.record_run(two_runs, "base", objective={"workload": "chat-1k", "metric": "mean_tpot_ms",
                                                       "goal": "min"})  # fmt: skip
    results_db.record_run(two_runs, "slow", objective={"workload": "chat-1k", "metric": "mean_tpot_ms",
                                                       "goal": "min"})  # fmt: skip
    changes = regression.compare_runs(two_runs, "base", "slow")
    measured = [c for c in changes if c.p_value is not None]
    assert measured and all(c.change is not None and c.change > 0 for c in measured)  # tpot went up
    assert all(c.regressed for c in measured)
    reverse = regression.compare_runs(two_runs, "slow", "base")
    assert any(c.improved for c in reverse) and not any(c.regressed for c in reverse if c.p_value is not None)
