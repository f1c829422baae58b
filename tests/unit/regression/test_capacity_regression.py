"""`bwtune regress` with a capacity objective (issue 26): a capacity search gives one value
per launch, so a regression run's launches are the samples, compared with the same
noise-aware statistics as any objective."""

from __future__ import annotations

import random
import sqlite3

from history_lines import STACK

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import regression, regression_history, results_db

WORKLOAD = "capacity"
OBJECTIVE = {"workload": WORKLOAD, "metric": "capacity", "goal": "max"}
CONFIG = "ccap0000001"


def _line(run_id: str, day: int, number: int, capacity: float, objective: dict) -> dict:
    # The last passing round's latencies sit next to the capacity (docs/capacity.md).
    # A higher rate is a slower round: a higher capacity found comes with higher latencies.
    values = {"capacity": capacity, "median_ttft_ms": 20.0 * capacity, "median_itl_ms": capacity,
              "p99_itl_ms": 2.0 * capacity}  # fmt: skip
    block = {"value": capacity, "unit": "requests/s", "slo": {"p99_ttft_ms": 2000.0}, "rounds": [],
             "last_passing": capacity, "first_failing": capacity * 1.05, "lower_bound": False}  # fmt: skip
    metrics = {WORKLOAD: {"n": 1, "values": values, "ci95": {}, "cv": {},
                          "repetitions": [{"capacity": capacity}], "capacity": block}}  # fmt: skip
    started = f"2026-11-{day:02d}T02:00:00+00:00"
    line = contract.make_line(
        run_id=run_id, host="node1", config_id=CONFIG, flags={"tp-size": 8}, status="ok", simulated=True,
        stack_fingerprint=STACK["fingerprint"], stack=dict(STACK), gpu="sm120",
        sglang_version=STACK["sglang"], started_at=started,
        finished_at=f"2026-11-{day:02d}T02:{number:02d}:00+00:00", metrics=metrics,
    )  # fmt: skip
    line["objective"] = dict(objective)
    return line


def _store(
    conn: sqlite3.Connection, run_id: str, day: int, level: float, seed: int, objective: dict = OBJECTIVE
) -> None:
    rng = random.Random(seed)
    results_db.record_run(conn, run_id, objective=objective, created_at=f"2026-11-{day:02d}T02:00:00+00:00")
    for number in range(8):  # each launch's search lands within a few % of the level
        results_db.import_results(
            conn, [_line(run_id, day, number, round(level * rng.gauss(1.0, 0.03), 3), objective)]
        )
    results_db.tag_run(conn, run_id, "regression")


def _capacity_verdict(conn: sqlite3.Connection, run_id: str) -> regression.Verdict:
    report = regression_history.analyze(conn, run_id)
    (config,) = report.configs
    (workload,) = config.workloads
    # Only the capacity: the last passing round's latencies were measured at another rate.
    (verdict,) = workload.verdicts
    assert verdict.metric == "capacity"
    return verdict


def test_a_lower_capacity_is_a_regression(db: sqlite3.Connection) -> None:
    _store(db, "night-1", 1, 20.0, seed=1)
    _store(db, "night-2", 2, 16.0, seed=2)  # 20% fewer requests/s under the same SLO
    verdict = _capacity_verdict(db, "night-2")
    assert verdict.goal == "max" and verdict.launches == (8, 8)
    assert verdict.verdict == regression.REGRESSION
    assert verdict.change is not None and -0.25 < verdict.change < -0.15


def test_a_higher_capacity_is_an_improvement_and_noise_is_no_change(db: sqlite3.Connection) -> None:
    _store(db, "night-1", 1, 20.0, seed=1)
    _store(db, "night-2", 2, 20.0, seed=2)
    _store(db, "night-3", 3, 25.0, seed=3)
    assert _capacity_verdict(db, "night-2").verdict == regression.NO_CHANGE
    assert _capacity_verdict(db, "night-3").verdict == regression.IMPROVEMENT  # latencies rose with it


def test_a_capacity_workload_beside_another_objective_is_compared_by_capacity(db: sqlite3.Connection) -> None:
    other = {"workload": "chat", "metric": "output_throughput", "goal": "max"}
    _store(db, "night-1", 1, 20.0, seed=1, objective=other)
    _store(db, "night-2", 2, 16.0, seed=2, objective=other)
    report = regression_history.analyze(db, "night-2")
    (config,) = report.configs
    assert [(w.workload, [v.metric for v in w.verdicts]) for w in config.workloads] == [
        (WORKLOAD, ["capacity"])
    ]
    assert config.workloads[0].verdicts[0].verdict == regression.REGRESSION
