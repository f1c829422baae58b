"""`bwtune plan`'s cost per launch: the median of measured launches of the same hardware group
in the results database, else the matrix's estimates; the plan says which."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import launch_cost, results_db
from bwtune.cli import main

SM120 = Path(__file__).resolve().parents[2] / "examples" / "qwen35-397b-nvfp4-sm120.yml"
WORKLOADS = [w["name"] for w in yaml.safe_load(SM120.read_text())["workloads"]]
MATRIX = {"matrix_startup_s": 600.0, "matrix_workload_s": 240.0}


def measured(
    n: int,
    ready_s: float,
    bench_s: float,
    *,
    gpu: str = "sm120",
    simulated: bool = False,
    workloads: list[str] | None = None,
    status: str = "ok",
    cold: bool = True,
) -> dict[str, Any]:
    """A launch of config n: ready after `ready_s`, 10 s gate, 5 s stop, `bench_s` of workloads."""
    names = WORKLOADS if workloads is None else workloads
    return contract.make_line(
        run_id="r-past",
        host="gpu-a",
        config_id=f"c{n:010d}",
        status=status,
        failure=None if status == "ok" else contract.make_failure(status, "failed"),
        gpu=gpu,
        simulated=simulated,
        flags={"n": n},
        timings={"startup_s": ready_s + 0.5, "gate_s": 10.0, "bench_s": bench_s, "stop_s": 5.0},
        cold_start={"to_ready_s": ready_s, "reached": "first_token"} if cold else None,
        metrics={name: {"values": {"output_throughput": 100.0}} for name in names} if status == "ok" else {},
    )


def test_the_median_of_the_group_launches_sets_the_cost() -> None:
    lines = [measured(1, 300.0, 400.0), measured(2, 200.0, 380.0), measured(3, 900.0, 1000.0)]
    cost = launch_cost.estimate(lines, WORKLOADS, **MATRIX)
    assert cost.source == launch_cost.MEASURED
    # One slow first launch (cold page cache) does not set the price: 300 s + gate + stop.
    assert cost.startup_s == 315.0 and cost.workload_s == 400.0 and cost.per_launch_s == 715.0
    assert (cost.launches, cost.workload_launches, cost.simulated) == (3, 3, False)


def test_lines_older_than_the_cold_start_field_count_by_their_startup_time() -> None:
    cost = launch_cost.estimate([measured(1, 300.0, 400.0, cold=False)], WORKLOADS, **MATRIX)
    assert cost.source == launch_cost.MEASURED and cost.startup_s == 315.5


def test_other_workloads_leave_the_workload_time_to_the_matrix() -> None:
    cost = launch_cost.estimate([measured(1, 300.0, 50.0, workloads=["tiny"])], WORKLOADS, **MATRIX)
    assert cost.startup_s == 315.0 and cost.workload_s == 240.0
    assert cost.workload_launches == 0 and "the matrix's estimates" in cost.describe()


def test_simulated_launches_never_price_real_gpus_and_price_the_stand_in_labelled() -> None:
    simulated = [measured(n, 3.0, 1.0, simulated=True) for n in range(1, 4)]
    assert (
        launch_cost.estimate([*simulated, measured(9, 300.0, 400.0)], WORKLOADS, **MATRIX).startup_s == 315.0
    )
    # Only the stand-in's launches: a real plan keeps the matrix's estimate and says why.
    real_plan = launch_cost.estimate(simulated, WORKLOADS, **MATRIX)
    assert (real_plan.source, real_plan.per_launch_s, real_plan.simulated) == (
        launch_cost.MATRIX,
        840.0,
        False,
    )
    assert real_plan.describe().endswith(
        "; 3 simulated launches (stand-in) in the results database not counted"
    )
    stand_in = launch_cost.estimate(simulated, WORKLOADS, **MATRIX, simulated=True)
    assert stand_in.source == launch_cost.MEASURED and stand_in.startup_s == 18.0
    assert stand_in.simulated and "simulated launches (stand-in)" in stand_in.describe()
    # ... and the stand-in's estimate is not priced by real launches either.
    assert launch_cost.estimate([measured(9, 300.0, 400.0)], WORKLOADS, **MATRIX, simulated=True).source == (
        launch_cost.MATRIX
    )


def test_plan_after_the_demo_prices_real_gpus_from_the_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.db"
    conn = results_db.connect(path)
    try:  # what `make demo` leaves: six simulated launches of the matrix's GPU
        results_db.import_results(conn, [measured(n, 3.0, 1.0, simulated=True) for n in range(1, 7)])
    finally:
        conn.close()
    est = _estimate(capsys, "--db", str(path))
    assert (est["source"], est["gpu_hours"], est["simulated"]) == ("matrix", 67.2, False)
    assert est["left_out_launches"] == 6
    assert main(["plan", str(SM120), "--db", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "about 67.2 GPU-hours (600 s startup" in out
    assert "6 simulated launches (stand-in) in the results database not counted" in out


def test_without_measured_launches_the_matrix_estimate_stands() -> None:
    failed = measured(1, 300.0, 400.0, status="oom")
    for lines in ([], [failed]):
        cost = launch_cost.estimate(lines, WORKLOADS, **MATRIX)
        assert (cost.source, cost.per_launch_s, cost.launches) == (launch_cost.MATRIX, 840.0, 0)
        assert cost.describe().startswith("estimate from the matrix")


# ---------------------------------------------------------------- bwtune plan


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    conn = results_db.connect(path)
    try:
        lines = [measured(1, 300.0, 400.0), measured(2, 200.0, 380.0), measured(3, 900.0, 1000.0)]
        lines.append(measured(4, 5.0, 5.0, gpu="sm100"))  # another hardware group: not counted
        results_db.import_results(conn, lines)
    finally:
        conn.close()
    return path


def _estimate(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["plan", str(SM120), "--json", *args]) == 0
    return dict(json.loads(capsys.readouterr().out)["summary"]["estimate"])


def test_plan_estimates_from_the_database_of_the_same_gpu(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    est = _estimate(capsys, "--db", str(db))
    assert est["source"] == "results database" and est["measured_launches"] == 3
    assert est["per_launch_s"] == 715.0
    # 36 launches of 8 GPUs each at 715 s.
    assert est["gpu_launches"] == 288 and est["gpu_hours"] == round(715.0 * 288 / 3600, 2)
    assert main(["plan", str(SM120), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "about 57.2 GPU-hours (315 s startup, 715 s per launch; from the results database" in out
    # grid: 36 launches, up to 6 more re-measures of a win within the noise (issue 24)
    assert "grid 36-42 launches (57.2-66.7 GPU-h)" in out


def test_plan_falls_back_to_the_matrix_and_creates_no_database(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none" / "results.db"
    est = _estimate(capsys, "--db", str(missing))
    assert est["source"] == "matrix" and est["per_launch_s"] == 840.0 and est["gpu_hours"] == 67.2
    assert not missing.parent.exists()
    # Measured launches of another GPU do not price this one.
    assert _estimate(capsys, "--db", str(db), "--gpu", "sm100")["source"] == "results database"
    assert _estimate(capsys, "--db", str(db), "--gpu", "sm90")["source"] == "matrix"


def test_an_unreadable_database_is_said_and_the_matrix_estimate_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "results.db"
    bad.write_bytes(b"not a database" * 100)
    assert main(["plan", str(SM120), "--json", "--db", str(bad)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["summary"]["estimate"]["source"] == "matrix"
    assert out.err.startswith(f"bwtune plan: {bad}: ") and out.err.endswith("; estimating from the matrix\n")
