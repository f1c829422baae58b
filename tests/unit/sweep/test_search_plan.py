"""What `bwtune plan` says each strategy can launch, against what the strategies launch."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import planner
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategies import (
    Objective,
    Scoreboard,
    planned_launches,
    run_order,
)
from bwtune.cli import main

SM120 = Path(__file__).resolve().parents[3] / "examples" / "qwen35-397b-nvfp4-sm120.yml"
SPEED = {"marlin": 0.7, "triton": 0.6, "mtp3": 2.0, "flashinfer_cutlass": 1.0, "trtllm_mha": 1.02}


@pytest.fixture(scope="module")
def mission() -> tuple[dict[str, Any], dict[str, Any]]:
    matrix = yaml.safe_load(SM120.read_text())
    return matrix, planner.plan(matrix, gpu="sm120").to_dict()


def test_launch_ranges_of_the_mission_matrix(mission: tuple[dict[str, Any], dict[str, Any]]) -> None:
    _matrix, plan = mission
    # 36 valid configs; one axis at a time from the baseline: 1 + 1 (MoE: only marlin is
    # valid besides the baseline) + 2 + 2 + 1. adaptive: at most a third of the 36 configs
    # (its budget, failed launches included). Every strategy: then up to six re-measures
    # (the finals: a lead within the measured noise, three finalists, three launches each).
    assert planned_launches(plan) == {
        "grid": (36, 42),
        "coordinate": (7, 14),
        "screen": (36, 42),
        "adaptive": (7, 18),
    }


@pytest.mark.parametrize("strategy", ["coordinate", "adaptive"])
def test_a_sweep_launches_within_the_planned_range(
    strategy: str, mission: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    matrix, plan = mission
    points = {c["id"]: c["point"] for c in plan["configs"]}
    scores = Scoreboard(Objective("single", "tok"))
    launched = []
    for config_id in run_order(strategy, plan, scores, matrix["axes"]):
        launched.append(config_id)
        value = 70.0 * math.prod(SPEED.get(str(v), 1.0) for v in points[config_id].values())
        metrics = {"single": {"values": {"tok": value}}}
        scores.record({"config_id": config_id, "host": "h", "status": "ok", "metrics": metrics})
    fewest, most = planned_launches(plan, matrix["axes"])[strategy]
    assert fewest <= len(launched) <= most


def test_plan_prints_launches_and_gpu_hours_per_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(SM120)]) == 0
    out = capsys.readouterr().out
    assert "grid 36-42 launches (67.2-78.4 GPU-h)" in out
    assert "coordinate 7-14 launches (13.1-26.1 GPU-h)" in out
    assert "adaptive 7-18 launches" in out


@pytest.mark.parametrize("strategy", ["grid", "coordinate", "screen", "adaptive"])
@pytest.mark.parametrize("working", [1, 3, 9])
def test_the_announced_budget_is_kept_when_most_launches_fail(
    strategy: str, working: int, mission: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """Failed launches count: on a landscape where all but a few configs fail after loading,
    no strategy launches more than `bwtune plan` announced for it (issue 24: adaptive went
    to 19-31 launches against 14): adaptive's budget, or, while every launch fails, what
    the plan announces for that case, and then only the finals."""
    matrix, plan = mission
    valid = [launch["config"] for launch in plan["launches"]]
    ok = set(valid[-working:])
    scores = Scoreboard(Objective("single", "tok"))
    launched = []
    for config_id in run_order(strategy, plan, scores, matrix["axes"]):
        launched.append(config_id)
        if config_id in ok:
            metrics = {"single": {"values": {"tok": 50.0 + valid.index(config_id)}}}
            scores.record({"config_id": config_id, "host": "h", "status": "ok", "metrics": metrics})
        else:
            scores.record({"config_id": config_id, "host": "h", "status": "crashed", "metrics": {}})
    most = planned_launches(plan, matrix["axes"])[strategy][1]
    first_ok = next((i for i, c in enumerate(launched) if c in ok), len(launched))
    if strategy == "adaptive" and first_ok >= most - strategies.REMEASURES:
        # while every launch fails adaptive goes on until one runs, as the plan says
        # (launches_while_nothing_runs); once one ran only the finals may follow
        assert first_ok < strategies.launches_while_nothing_runs(plan)
        assert len(launched) - (first_ok + 1) <= strategies.REMEASURES
    else:
        assert len(launched) <= most
