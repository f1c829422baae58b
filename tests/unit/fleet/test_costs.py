"""A launch's estimated cost for sharing: the config's own measured launches on the group's
hardware, else those of the configs sharing the most axis values, else the plan's estimate;
read through the store's queries from a real results database."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import results_db
from bwtune.analysis.hardware_group import HardwareGroup
from bwtune.fleet import costs
from bwtune.fleet.shares import Launch

EIGHT = HardwareGroup(gpu_model="NVIDIA RTX PRO 6000", gpu_count=8, sm="sm120", interconnect="pcie")
WORKLOADS = [{"name": "chat"}, {"name": "long"}]
POINTS = {
    "c_measured": {"moe": "cutlass", "attn": "flashinfer"},
    "c_same_moe": {"moe": "cutlass", "attn": "triton"},
    "c_stranger": {"moe": "triton", "attn": "fa4"},
}
LAUNCHES = [{"config": c, "workloads": WORKLOADS} for c in POINTS]
PLAN_STARTUP, PLAN_WORKLOAD = 600.0, 240.0


def line(run: str, host: str, config: str, ready_s: float, bench_s: float, **extra: Any) -> dict[str, Any]:
    metrics = {w["name"]: {"n": 1, "values": {"output_throughput": 1.0}} for w in WORKLOADS}
    return contract.make_line(
        run_id=run, host=host, config_id=config, status="ok", flags={}, point=POINTS[config], gpu="sm120",
        metrics=metrics, cold_start={"to_ready_s": ready_s, "reached": "ready"},
        timings={"startup_s": ready_s, "gate_s": 5.0, "bench_s": bench_s, "stop_s": 5.0}, **extra,
    )  # fmt: skip


def keep_gpus(conn: sqlite3.Connection, run: str, host: str, count: int) -> None:
    facts = {"available": True, "message": f"{count} x NVIDIA RTX PRO 6000", "count": count, "sm": "sm120"}
    results_db.record_host_facts(
        conn, run, host, gpu_facts=results_db.gpu_facts_summary({**facts, "interconnect": "pcie"})
    )


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    db = results_db.connect(tmp_path / "results.db")
    results_db.import_results(
        db,
        [
            line("r1", "big", "c_measured", 300.0, 100.0),
            line("r1", "big", "c_measured", 320.0, 120.0, finished_at="2026-11-30T11:00:00"),
            line("r1", "small", "c_same_moe", 900.0, 900.0),  # 4 GPUs: not this group's price
            line("r2", "sim", "c_stranger", 3.0, 1.0, simulated=True),  # the stand-in's seconds
        ],
    )
    keep_gpus(db, "r1", "big", 8)
    keep_gpus(db, "r1", "small", 4)
    keep_gpus(db, "r2", "sim", 8)
    yield db
    db.close()


def estimates(conn: sqlite3.Connection, simulated: bool = False) -> dict[str, costs.Estimate]:
    lines = costs.group_lines(conn, EIGHT, simulated=simulated)
    return costs.estimate_costs(
        LAUNCHES, POINTS, lines, plan_startup_s=PLAN_STARTUP, plan_workload_s=PLAN_WORKLOAD
    )


def test_measured_then_axis_values_then_the_plans_estimate(conn: sqlite3.Connection) -> None:
    found = estimates(conn)
    # c_measured: its own two launches on the 8-GPU host (a re-measure keeps the first as a
    # superseded launch; both count): cold starts 300 and 320 (+ gate 5 + stop 5 each), median
    # 320; workloads 100 and 120, median 110.
    measured = found["c_measured"]
    assert measured == costs.Estimate("c_measured", 320.0 + 110.0, costs.CONFIG, 2)
    # c_same_moe shares moe=cutlass with c_measured; its own 4-GPU launch does not count.
    assert found["c_same_moe"].source == costs.AXES
    assert found["c_same_moe"].cost_s == measured.cost_s
    # c_stranger shares no axis value with a real 8-GPU launch: the plan's estimate.
    assert found["c_stranger"] == costs.Estimate("c_stranger", PLAN_STARTUP + PLAN_WORKLOAD, costs.PLAN)


def test_a_simulated_plan_is_priced_from_simulated_launches_only(conn: sqlite3.Connection) -> None:
    found = estimates(conn, simulated=True)
    assert found["c_stranger"] == costs.Estimate("c_stranger", 3.0 + 5.0 + 5.0 + 1.0, costs.CONFIG, 1)
    assert found["c_measured"].source == costs.PLAN, "no simulated launch shares an axis value with it"


def test_other_workloads_keep_the_plans_workload_estimate(conn: sqlite3.Connection) -> None:
    lines = costs.group_lines(conn, EIGHT, simulated=False)
    other = [{"config": "c_measured", "workloads": [{"name": "chat"}]}]
    found = costs.estimate_costs(other, POINTS, lines, plan_startup_s=PLAN_STARTUP, plan_workload_s=7.0)
    assert found["c_measured"].source == costs.CONFIG
    assert found["c_measured"].cost_s == 320.0 + 7.0, "measured cold start, the plan's workload time"


def test_the_costs_become_launches_for_share_in_the_plans_order(conn: sqlite3.Connection) -> None:
    found = estimates(conn)
    assert costs.as_launches(LAUNCHES, found) == [Launch(c, found[c].cost_s) for c in POINTS]


def test_a_group_without_an_sm_learns_nothing(conn: sqlite3.Connection) -> None:
    assert costs.group_lines(conn, HardwareGroup(gpu_count=8), simulated=False) == []
