"""Regression statistics between two runs of the same config set.

Per config (host, id) present in both runs, the objective's repetitions of the baseline
and the candidate run are compared with Welch's t-test (default) or a bootstrap of the
difference of means. A regression is a change in the wrong direction for the objective's
goal that is both significant (p < alpha) and at least `min_effect` relative to the
baseline, so noise on a quiet config is not flagged. Standard library only; the t
distribution is module_utils/student_t.py, the one the node's intervals use.
"""

from __future__ import annotations

import math
import random
import sqlite3
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ansible_collections.bwtune.sglang.plugins.module_utils import student_t
from bwtune import results_db

Method = Literal["welch", "bootstrap"]


@dataclass(frozen=True)
class TestResult:
    statistic: float
    df: float | None
    p_value: float


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> TestResult:
    """Two-sided Welch's t-test of mean(b) - mean(a); needs at least two values each."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("Welch's t-test needs at least two repetitions on each side")
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = mean_b - mean_a
    if va + vb == 0.0:
        # No spread at all: any difference is certain, none is no evidence.
        return TestResult(math.copysign(math.inf, diff) if diff else 0.0, None, 0.0 if diff else 1.0)
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return TestResult(t, df, min(1.0, 2.0 * student_t.t_cdf(-abs(t), df)))


def bootstrap_test(
    a: Sequence[float], b: Sequence[float], *, rounds: int = 4000, seed: int = 0
) -> TestResult:
    """Two-sided bootstrap p-value of mean(b) - mean(a) under the pooled null (seeded)."""
    if not a or not b:
        raise ValueError("the bootstrap needs at least one repetition on each side")
    rng = random.Random(seed)
    observed = statistics.fmean(b) - statistics.fmean(a)
    # Shift both samples to the pooled mean so resampling happens under "no difference".
    pooled = statistics.fmean([*a, *b])
    a0 = [x - statistics.fmean(a) + pooled for x in a]
    b0 = [x - statistics.fmean(b) + pooled for x in b]
    extreme = 0
    for _ in range(rounds):
        da = statistics.fmean(rng.choices(a0, k=len(a0)))
        db = statistics.fmean(rng.choices(b0, k=len(b0)))
        if abs(db - da) >= abs(observed) - 1e-12:
            extreme += 1
    return TestResult(observed, None, (extreme + 1) / (rounds + 1))


# --------------------------------------------------------------------------- comparing runs


@dataclass(frozen=True)
class ConfigChange:
    host: str
    config_id: str
    baseline_mean: float | None
    candidate_mean: float | None
    change: float | None  # candidate - baseline
    relative_change: float | None  # change / baseline
    p_value: float | None
    significant: bool
    regressed: bool
    improved: bool
    note: str  # why no test was possible, or the method used

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def objective_repetitions(record: Mapping[str, Any], objective: Mapping[str, Any]) -> list[float]:
    block = (record.get("metrics") or {}).get(objective.get("workload")) or {}
    return [
        float(rep[objective["metric"]])
        for rep in block.get("repetitions") or []
        if rep.get(objective["metric"]) is not None
    ]


def compare_results(
    baseline: Sequence[Mapping[str, Any]],
    candidate: Sequence[Mapping[str, Any]],
    objective: Mapping[str, Any],
    *,
    method: Method = "welch",
    alpha: float = 0.05,
    min_effect: float = 0.02,
) -> list[ConfigChange]:
    """Compare results lines (contract shape) of two runs config by config."""
    base = {(r["host"], r["config_id"]): r for r in baseline}
    cand = {(r["host"], r["config_id"]): r for r in candidate}
    worse_sign = -1.0 if objective.get("goal", "max") == "max" else 1.0
    changes = []
    for key in sorted(base.keys() & cand.keys()):
        b_rec, c_rec = base[key], cand[key]
        if b_rec["status"] != "ok" or c_rec["status"] != "ok":
            note = f"status {b_rec['status']} -> {c_rec['status']}"
            # A config that worked and now fails is a regression by definition.
            broke = b_rec["status"] == "ok" and c_rec["status"] != "ok"
            changes.append(ConfigChange(*key, None, None, None, None, None, broke, broke, False, note))
            continue
        a = objective_repetitions(b_rec, objective)
        b = objective_repetitions(c_rec, objective)
        if not a or not b:
            changes.append(
                ConfigChange(*key, None, None, None, None, None, False, False, False, "no repetitions")
            )
            continue
        mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
        change = mean_b - mean_a
        relative = change / mean_a if mean_a else None
        if method == "welch" and (len(a) < 2 or len(b) < 2):
            changes.append(ConfigChange(*key, mean_a, mean_b, change, relative, None, False, False, False,
                                        "fewer than 2 repetitions"))  # fmt: skip
            continue
        test = welch_t_test(a, b) if method == "welch" else bootstrap_test(a, b)
        significant = test.p_value < alpha
        large = relative is None or abs(relative) >= min_effect
        regressed = significant and large and change * worse_sign > 0
        improved = significant and large and change * worse_sign < 0
        changes.append(
            ConfigChange(
                *key, mean_a, mean_b, change, relative, test.p_value, significant, regressed, improved, method
            )
        )
    return changes


def compare_runs(
    conn: sqlite3.Connection,
    baseline_run: str,
    candidate_run: str,
    *,
    method: Method = "welch",
    alpha: float = 0.05,
    min_effect: float = 0.02,
) -> list[ConfigChange]:
    """Compare two stored runs on the candidate run's objective."""
    objective = results_db.resolved_objective(conn, candidate_run)
    return compare_results(
        results_db.run_results(conn, baseline_run),
        results_db.run_results(conn, candidate_run),
        objective,
        method=method,
        alpha=alpha,
        min_effect=min_effect,
    )


def regressions(changes: Sequence[ConfigChange]) -> list[ConfigChange]:
    return [change for change in changes if change.regressed]
