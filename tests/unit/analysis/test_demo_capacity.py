"""The demo's small capacity run (issue 26, `bwtune demo --capacity`): its matrix is a small
version of examples/qwen35-397b-capacity.yml that plans on the demo's model, its rounds are
short on the stand-in's own load model, and its summary shows each config's capacity under
the SLO and the Pareto front, labelled SIMULATED on the stand-in."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import plan
from bwtune.app import demo_capacity, sweep_service
from bwtune.commands import demo
from bwtune.standin.load_capacity import RoundLoad, true_capacity
from bwtune.standin.profile import load_profile

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = yaml.safe_load((REPO / "examples" / "qwen35-397b-capacity.yml").read_text())
DEMO = yaml.safe_load((REPO / "examples" / "demo.yml").read_text())


def test_the_matrix_is_the_capacity_examples_slo_and_objective_on_the_demos_model() -> None:
    matrix, source = demo_capacity.capacity_matrix(REPO)
    assert source == str(REPO / "examples" / "qwen35-397b-capacity.yml")
    assert (
        matrix["objective"]
        == EXAMPLE["objective"]
        == {"workload": "capacity", "metric": "capacity", "goal": "max"}
    )
    assert Path(matrix["model"]["path"]) == (REPO / "examples" / DEMO["model"]["path"]).resolve()
    (workload,) = matrix["workloads"]
    assert workload["capacity"]["slo"] == EXAMPLE["workloads"][0]["capacity"]["slo"]
    assert workload["num_prompts"] >= 100  # a p99 of fewer requests is the slowest one
    planned = plan(matrix)
    points = [c.point for c in planned.valid()]
    assert len(planned.launches) == len(points) == 4
    # MTP on and off, each MoE runner of the example.
    assert {(p["moe-runner-backend"], p["speculative"]) for p in points} == {
        (moe, spec) for moe in EXAMPLE["axes"]["moe-runner-backend"] for spec in ("none", "mtp3")
    }
    # Every launch is one the plain demo also launches: the stand-in has SGLang's verdicts for it.
    demo_argvs = {
        tuple(c.argv) for c in plan(sweep_service.load_matrix(REPO / "examples" / "demo.yml")).valid()
    }
    assert {tuple(c.argv) for c in planned.valid()} <= demo_argvs


def test_each_configs_search_starts_near_its_true_capacity_and_its_rounds_are_short() -> None:
    """On the stand-in's profile (its load model, computed without a server), the start rate
    is within 2x of every config's true capacity, so 5 rounds bracket and bisect it, and a
    round at the capacity is seconds, not the minutes of the example's long requests."""
    matrix, _ = demo_capacity.capacity_matrix(REPO)
    (workload,) = matrix["workloads"]
    spec = workload["capacity"]
    load = RoundLoad(workload["input_len"], workload["output_len"], workload["num_prompts"])
    profile = load_profile()
    capacities = {}
    for config in plan(matrix).valid():
        cap = true_capacity(profile, config.flags, spec["slo"], load, seeds=3, rel_tol=0.01)
        assert not cap.lower_bound and cap.rate > 0, config.point
        capacities[config.point["moe-runner-backend"], config.point["speculative"]] = cap.rate
        assert spec["start_rate"] / 2 <= cap.rate <= spec["start_rate"] * 2, (config.point, cap.rate)
        assert workload["num_prompts"] / cap.rate < 15, (config.point, cap.rate)
    # The SLO orders the configs: MTP serves more under it than the same runner without.
    for moe in EXAMPLE["axes"]["moe-runner-backend"]:
        assert capacities[moe, "mtp3"] > capacities[moe, "none"]


def _result(
    cid: str,
    value: float,
    tput: float,
    tpot: float,
    *,
    status: str = "ok",
    per_user: float = 30.0,
    **cap: Any,
) -> dict[str, Any]:
    capacity = {"value": value, "unit": "requests/s", "slo": {"p99_ttft_ms": 2000, "p99_tpot_ms": 50},
                "rounds": [{"load": 12.0}] * 5, "last_passing": value or None,
                "first_failing": value * 1.1 if value else 0.75, "lower_bound": False, **cap}  # fmt: skip
    values = {"capacity": value, "output_throughput": tput, "p99_tpot_ms": tpot, "p99_ttft_ms": 800.0,
              "output_tok_s_per_request": per_user}  # fmt: skip
    return {"id": cid, "host": "localhost", "status": status, "point": {}, "flags": {"tp-size": 8},
            "metrics": {"capacity": {"values": values, "capacity": capacity}}}  # fmt: skip


def _output(simulated: bool) -> dict[str, Any]:
    results = [
        _result("c-slow", 8.1, 250.0, 30.0, per_user=60.0),
        _result("c-mtp", 21.8, 690.0, 40.0, per_user=50.0),
        _result("c-none", 13.0, 410.0, 20.0),
        _result(
            "c-never", 0.0, 100.0, 60.0, reason="the SLO failed at every rate tried, down to 0.75 requests/s"
        ),
        _result("c-broken", 99.0, 9999.0, 1.0, status="failed"),  # a failed launch is never shown
    ]
    return {
        "summary": {"simulated": simulated},
        "results": results,
        "best": {"id": "c-mtp", "host": "localhost"},
    }


def test_the_summary_shows_each_configs_capacity_highest_first_and_the_front() -> None:
    found = demo_capacity.summary(_output(simulated=True))
    assert [r["id"] for r in found["capacity"]] == ["c-mtp", "c-none", "c-slow", "c-never"]
    lines = demo.capacity_lines(found, {"id": "c-mtp", "host": "localhost"})
    text = "\n".join(lines)
    assert "SIMULATED" in lines[1] and "(workload capacity)" in lines[1]
    assert "p99_ttft_ms <= 2000, p99_tpot_ms <= 50" in lines[1]
    assert "c-broken" not in text
    assert "  c-mtp *: 21.8 requests/s (last passing 21.8/s, first failing 24/s, 5 rounds)" in lines
    assert (
        "  c-never: 0 requests/s (last passing none, first failing 0.75/s, 5 rounds; the SLO failed" in text
    )
    (tpot_front,) = [line for line in lines if "against p99_tpot_ms" in line]
    # Against p99 TPOT: c-mtp (most tok/s) and c-none (lowest TPOT of the faster ones); c-slow
    # and c-never are beaten by c-none on both.
    assert "SLO 50 ms" in tpot_front
    assert "c-mtp * (690 tok/s, 40.0 ms)" in tpot_front and "c-none (410 tok/s, 20.0 ms)" in tpot_front
    assert "c-slow" not in tpot_front and "c-never" not in tpot_front
    # Per user against per GPU (8 GPUs each, tp-size 8): c-mtp (most per GPU) and c-slow (the
    # fastest per user: 60 tok/s) are on it; c-none and c-never are beaten by c-mtp on both.
    (speed_front,) = [line for line in lines if "tok/s per user against tok/s per GPU" in line]
    assert "c-mtp * (50.0 tok/s per user, 86.2 per GPU)" in speed_front
    assert "c-slow (60.0 tok/s per user, 31.2 per GPU)" in speed_front
    assert "c-none" not in speed_front and "c-never" not in speed_front


def test_a_real_runs_summary_is_not_labelled_simulated() -> None:
    output = _output(simulated=False)
    lines = demo.capacity_lines(demo_capacity.summary(output), output["best"])
    assert lines and not any("SIMULATED" in line for line in lines)
    del output["best"]  # no winner (nothing measured): nothing starred, in the list or the front
    assert not any(" *" in line for line in demo.capacity_lines(demo_capacity.summary(output), None))


def test_a_run_without_a_capacity_workload_has_no_summary() -> None:
    output = _output(simulated=True)
    for result in output["results"]:
        del result["metrics"]["capacity"]["capacity"]
    assert demo_capacity.summary(output)["capacity"] == []


def test_capacity_with_resume_is_refused_naming_both() -> None:
    args = argparse.Namespace(
        capacity=True, resume="20261202T000000Z-00000000", strategy=None, quiet=True, json=False
    )
    with pytest.raises(sweep_service.BadInput, match=r"--capacity with --resume 20261202T000000Z-00000000"):
        demo._resume(args)


def test_a_broken_example_is_one_clear_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "demo.yml").write_text((REPO / "examples" / "demo.yml").read_text())
    (tmp_path / "examples" / "models").symlink_to(REPO / "examples" / "models")
    example = dict(EXAMPLE, workloads=[{"name": "c8", "input_len": 8, "output_len": 8, "concurrency": 8}])
    (tmp_path / "examples" / "qwen35-397b-capacity.yml").write_text(yaml.safe_dump(example))
    with pytest.raises(sweep_service.BadInput, match=r"qwen35-397b-capacity.yml: no capacity workload"):
        demo_capacity.capacity_matrix(tmp_path)
