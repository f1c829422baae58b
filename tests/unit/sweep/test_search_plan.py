"""What `bwtune plan` says each strategy can launch, against what the strategies launch."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils import planner
from ansible_collections.bwtune.sglang.plugins.module_utils.strategies import (
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
    # (its budget), then two re-measures.
    assert planned_launches(plan) == {
        "grid": (36, 36),
        "coordinate": (7, 8),
        "screen": (36, 36),
        "adaptive": (7, 14),
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
    assert "grid 36 launches (67.2 GPU-h)" in out
    assert "coordinate 7-8 launches (13.1-14.9 GPU-h)" in out
    assert "adaptive 7-14 launches" in out
