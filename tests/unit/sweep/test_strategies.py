"""Which configs each sweep strategy launches, driven by a fake measurement."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategies import (
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
    """Every valid config once, in plan order; what follows are re-measures only (the finals:
    a winner whose lead is within the measured noise), at most strategies.REMEASURES."""
    plan = make_plan(pruned={("trtllm", "cudnn", "mtp")})
    launched, _ = drive("grid", plan)
    assert launched[:11] == [launch["config"] for launch in plan["launches"]]
    assert len(launched) - 11 <= strategies.REMEASURES
    assert set(launched[11:]) <= set(launched[:11])


def _grid_on(values: dict[str, float]) -> tuple[list[str], Scoreboard]:
    plan = {
        "configs": [{"id": c, "point": {"x": c}, "status": "valid"} for c in values],
        "launches": [{"config": c, "workloads": ["single"]} for c in values],
    }
    scores = Scoreboard(Objective("single", "tok", "max"))
    launched = []
    for config_id in run_order("grid", plan, scores, {"x": list(values)}):
        launched.append(config_id)
        # one launch of "a" measures 10% high, its re-measures the truth
        value = values[config_id] * (1.1 if config_id == "a" and scores.launches("a") == 0 else 1.0)
        metrics = {"single": {"values": {"tok": value}}}
        scores.record({"config_id": config_id, "host": "h", "status": "ok", "metrics": metrics})
    return launched, scores


def test_grid_re_measures_a_win_within_the_noise_and_not_a_clear_one() -> None:
    # "a" is truly 5% behind "b" but its one launch reads 4.5% ahead: within the noise
    # (NOISE_PRIOR until two launches of one config measure it), so it is launched again
    # and the pooled means decide.
    launched, scores = _grid_on({"a": 95.0, "b": 100.0, "c": 50.0})
    assert launched[:3] == ["a", "b", "c"] and "a" in launched[3:]
    assert len(launched) <= 3 + strategies.REMEASURES
    assert scores.best() == "b"
    # A win far beyond the noise (2x) is not re-measured.
    launched, scores = _grid_on({"a": 200.0, "b": 100.0, "c": 50.0})
    assert launched == ["a", "b", "c"] and scores.best() == "a"


def test_grid_finals_go_on_while_contenders_are_within_the_noise() -> None:
    # Three configs measured equal: no launch count makes one lead beyond the noise, so the
    # finals end only when each finalist has its REPEATS launches (no cap of three re-measures
    # in all: that cap stopped them while contenders were still within the noise).
    values = {"a": 100.0, "b": 100.0, "c": 100.0, "d": 50.0}
    plan = {
        "configs": [{"id": c, "point": {"x": c}, "status": "valid"} for c in values],
        "launches": [{"config": c, "workloads": ["single"]} for c in values],
    }
    scores = Scoreboard(Objective("single", "tok", "max"))
    launched = []
    for config_id in run_order("grid", plan, scores, {"x": list(values)}):
        launched.append(config_id)
        metrics = {"single": {"values": {"tok": values[config_id]}}}
        scores.record({"config_id": config_id, "host": "h", "status": "ok", "metrics": metrics})
    assert launched[:4] == ["a", "b", "c", "d"]
    assert all(scores.launches(c) == strategies.REPEATS for c in "abc")
    assert len(launched) == 4 + strategies.FINALISTS * (strategies.REPEATS - 1) > 4 + 3
    assert scores.launches("d") == 1


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

    from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_contract import STRATEGIES
    from ansible_collections.bwtune.sglang.plugins.modules import sweep as sweep_module

    root = Path(__file__).resolve().parents[3]
    specs = yaml.safe_load((root / "roles/sweep/meta/argument_specs.yml").read_text())
    role = specs["argument_specs"]["main"]["options"]["sweep_strategy"]["choices"]
    module = yaml.safe_load(sweep_module.DOCUMENTATION)["options"]["strategy"]["choices"]
    assert tuple(role) == tuple(module) == STRATEGIES


def test_the_screen_is_at_most_a_quarter_of_a_small_objective_workload() -> None:
    """On a 4 x 128-token objective a fixed 3 x 4 x 128-token screen cost more than the
    workload it screens for (issue 24: `screen` at 105% of the grid)."""
    small = {"name": "single", "input_len": 256, "output_len": 128, "concurrency": 1, "num_prompts": 4}
    screen = strategies.screen_workload([small], "single")
    tokens = screen["output_len"] * screen["num_prompts"] * screen["repetitions"]
    assert tokens <= 128 * 4 / 4
    assert screen["repetitions"] >= 1 and screen["output_len"] >= 8
    big = {"name": "single", "input_len": 1024, "output_len": 512, "concurrency": 1, "num_prompts": 8}
    # the mission's objective (8 x 512 tokens): 128-token screens, 2 repetitions (a quarter)
    screen = strategies.screen_workload([big], "single")
    assert (screen["output_len"], screen["repetitions"]) == (128, 2)
