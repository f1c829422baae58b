"""Which configs each sweep strategy launches, driven by a fake measurement."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils.strategies import (
    Objective,
    Scoreboard,
    run_order,
    screen_passes,
)

AXES = {"moe": ["cutlass", "trtllm", "marlin"], "gemm": ["cudnn", "fi_cutlass"], "spec": ["none", "mtp"]}
# A separable speed model: each axis value adds tok/s, so the best of each axis combined wins.
SPEED = {"cutlass": 70, "trtllm": 0, "marlin": 40, "cudnn": 2, "fi_cutlass": 1, "none": 0, "mtp": 60}


def make_plan(pruned: set[tuple[str, ...]] = frozenset()) -> dict[str, Any]:
    configs, launches = [], []
    for n, values in enumerate(itertools.product(*AXES.values())):
        point = dict(zip(AXES, values, strict=True))
        status = "pruned" if values in pruned else "valid"
        configs.append({"id": f"c{n:010d}", "point": point, "status": status})
        if status == "valid":
            launches.append({"config": f"c{n:010d}", "workloads": ["single"]})
    return {"configs": configs, "launches": launches}


def measure(plan: dict[str, Any], config_id: str) -> dict[str, Any]:
    point = next(c["point"] for c in plan["configs"] if c["id"] == config_id)
    value = float(sum(SPEED[v] for v in point.values()))
    status = "ok" if value > 0 else "unsupported-hardware"
    metrics = {"single": {"values": {"output_tok_s_per_request": value}}} if status == "ok" else {}
    return {"config_id": config_id, "status": status, "metrics": metrics}


def drive(strategy: str, plan: dict[str, Any]) -> tuple[list[str], Scoreboard]:
    scores = Scoreboard(Objective("single", "output_tok_s_per_request", "max"))
    launched = []
    for config_id in run_order(strategy, plan, scores, AXES):
        launched.append(config_id)
        scores.record(measure(plan, config_id))
    return launched, scores


def point_of(plan: dict[str, Any], config_id: str) -> dict[str, Any]:
    return next(c["point"] for c in plan["configs"] if c["id"] == config_id)


def test_grid_launches_every_valid_config_once() -> None:
    plan = make_plan(pruned={("trtllm", "cudnn", "mtp")})
    launched, _ = drive("grid", plan)
    assert launched == [launch["config"] for launch in plan["launches"]]
    assert len(launched) == 11


def test_coordinate_finds_the_separable_optimum_with_fewer_launches() -> None:
    plan = make_plan()
    launched, scores = drive("coordinate", plan)
    assert len(launched) == len(set(launched)), "no config is launched twice"
    assert len(launched) < len(plan["launches"])
    assert point_of(plan, scores.best() or "") == {"moe": "cutlass", "gemm": "cudnn", "spec": "mtp"}


def test_coordinate_skips_refused_points_and_failed_values_never_win() -> None:
    plan = make_plan(pruned={("cutlass", "cudnn", "none")})  # the default baseline is refused
    launched, scores = drive("coordinate", plan)
    refused = next(c["id"] for c in plan["configs"] if c["status"] == "pruned")
    assert refused not in launched
    best = scores.best()
    assert best is not None and scores.results[best]["status"] == "ok"
    assert point_of(plan, best)["moe"] == "cutlass"


def test_objective_goal_min_prefers_smaller_values() -> None:
    objective = Objective("single", "median_ttft_ms", "min")
    assert objective.better(10.0, 20.0) and not objective.better(20.0, 10.0)


@pytest.mark.parametrize(
    ("candidate", "best", "goal", "passes"),
    [
        ((90.0, 110.0), (100.0, 120.0), "max", True),  # overlapping: not statistically worse
        ((50.0, 60.0), (100.0, 120.0), "max", False),  # wholly below the best
        ((50.0, 60.0), (100.0, 120.0), "min", True),  # lower is better
        ((130.0, 140.0), (100.0, 120.0), "min", False),
        ((1.0, 1.0), None, "max", True),  # the first one always passes
    ],
)
def test_screen_passes_only_when_not_statistically_worse(
    candidate: tuple[float, float], best: tuple[float, float] | None, goal: str, passes: bool
) -> None:
    assert screen_passes(candidate, best, goal) is passes


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown strategy 'random'"):
        run_order("random", make_plan(), Scoreboard(Objective("single", "x")), AXES)


def test_every_list_of_strategy_names_is_the_contracts() -> None:
    """YAML and module docs cannot import the list: they must say the same names."""
    from pathlib import Path

    import yaml

    from ansible_collections.bwtune.sglang.plugins.module_utils.results_contract import STRATEGIES
    from ansible_collections.bwtune.sglang.plugins.modules import sweep as sweep_module

    root = Path(__file__).resolve().parents[3]
    specs = yaml.safe_load((root / "roles/sweep/meta/argument_specs.yml").read_text())
    role = specs["argument_specs"]["main"]["options"]["sweep_strategy"]["choices"]
    module = yaml.safe_load(sweep_module.DOCUMENTATION)["options"]["strategy"]["choices"]
    assert tuple(role) == tuple(module) == STRATEGIES
