"""A config's regression history is on the same hardware: a run on a 4-GPU host of the
same SM is not the history of an 8-GPU one (bwtune.analysis.hardware_group's same_hardware,
from the GPU facts each run kept of its hosts)."""

from __future__ import annotations

import sqlite3

from history_lines import store_run

from bwtune import regression, regression_history, results_db

CONFIG = "cprod000001"


def keep_gpus(conn: sqlite3.Connection, run_id: str, count: int) -> None:
    facts = {"available": True, "message": f"{count} x NVIDIA RTX PRO 6000", "count": count, "sm": "sm120"}
    results_db.record_host_facts(
        conn, run_id, "node1", gpu_facts=results_db.gpu_facts_summary({**facts, "interconnect": "pcie"})
    )


def verdict_of(report: regression_history.RegressionReport) -> regression_history.ConfigReport:
    (config,) = report.configs
    return config


def test_an_8_gpu_history_is_not_the_reference_of_a_4_gpu_run(db: sqlite3.Connection) -> None:
    # Same SM, same stack, the config measured at half the speed on half the GPUs: with the
    # SM alone as the group, night-3 would be a regression against night-2.
    for day in (1, 2):
        store_run(db, f"night-{day}", day, {CONFIG: 2000.0}, launches=3, seed=day)
        keep_gpus(db, f"night-{day}", 8)
    store_run(db, "night-3", 3, {CONFIG: 1000.0}, launches=3, seed=3)
    keep_gpus(db, "night-3", 4)
    config = verdict_of(regression_history.analyze(db, "night-3"))
    assert config.reference_run is None
    assert not config.regressed
    assert {v.verdict for w in config.workloads for v in w.verdicts} == {regression.INCONCLUSIVE}
    assert [p.run_id for p in config.history] == ["night-3"]
    assert config.hardware_group["gpu_count"] == 4
    assert config.gpu == "sm120"


def test_the_same_hardware_is_the_history_and_a_regression_on_it_is_found(db: sqlite3.Connection) -> None:
    store_run(db, "night-1", 1, {CONFIG: 1000.0}, launches=3, seed=1)
    keep_gpus(db, "night-1", 4)
    store_run(db, "night-2", 2, {CONFIG: 2000.0}, launches=3, seed=2)
    keep_gpus(db, "night-2", 8)
    store_run(db, "night-3", 3, {CONFIG: 800.0}, launches=3, seed=3)
    keep_gpus(db, "night-3", 4)
    config = verdict_of(regression_history.analyze(db, "night-3"))
    assert config.reference_run == "night-1", "the 4-GPU run, not the newer 8-GPU one"
    assert config.regressed
    assert [p.run_id for p in config.history] == ["night-1", "night-3"]


def test_a_run_that_kept_no_gpu_facts_is_still_history_by_its_sm(db: sqlite3.Connection) -> None:
    # Runs imported without facts know the SM only: their count is not compared.
    store_run(db, "night-1", 1, {CONFIG: 1000.0}, launches=3, seed=1)
    store_run(db, "night-2", 2, {CONFIG: 1000.0}, launches=3, seed=2)
    keep_gpus(db, "night-2", 4)
    config = verdict_of(regression_history.analyze(db, "night-2"))
    assert config.reference_run == "night-1"
    assert not config.regressed
