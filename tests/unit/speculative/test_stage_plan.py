"""The speculative stage's matrix (bwtune.app.speculative_stage.stage_plan): the base run's
winner held, MTP off and the grid, at the base objective's load or at each --load."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import plan
from bwtune import ansible_run
from bwtune.app import speculative_stage as stage
from bwtune.app.sweep_service import BadInput

REPO = Path(__file__).resolve().parents[3]
DEMO = yaml.safe_load((REPO / "examples" / "demo.yml").read_text())


def winner(point: dict[str, Any], spec: bool = False) -> dict[str, Any]:
    """A base run's best result as `--json` shows it: the flags as SGLang resolved them."""
    flags: dict[str, Any] = {
        "tp-size": 8,
        "quantization": "modelopt_fp4",
        "moe-runner-backend": "flashinfer_cutlass",
        "fp4-gemm-backend": "flashinfer_cutlass",
        "mamba-radix-cache-strategy": "extra_buffer",
    }
    if spec:
        flags.update(
            {
                "speculative-algorithm": "EAGLE",
                "speculative-num-steps": 3,
                "speculative-eagle-topk": 1,
                "speculative-num-draft-tokens": 4,
                "speculative-moe-runner-backend": "flashinfer_cutlass",
            }
        )
    return {"id": "cwin", "host": "node1", "flags": flags, "point": point}


def request(**kw: Any) -> stage.StageRequest:
    inventory = ansible_run.load_inventory(REPO / "inventory" / "local.yml")
    return stage.StageRequest(base_run="r-base", inventory=inventory, **kw)


def test_off_and_the_grid_on_the_winners_flags():
    got = stage.stage_plan(request(), copy.deepcopy(DEMO), winner({"speculative": "none"}), "demo.yml")
    m = got.matrix
    assert m["axes"] == {"speculative": ["off", "s1k1d2", "s2k1d3", "s3k1d4"]}
    assert m["base"] == {k: v for k, v in winner({})["flags"].items()}
    # The demo's own MTP bundle, as the user spelt it: NEXTN (SGLang resolves it to EAGLE).
    assert m["bundles"]["speculative"]["s2k1d3"] == {
        "speculative-algorithm": "NEXTN",
        "speculative-num-steps": 2,
        "speculative-eagle-topk": 1,
        "speculative-num-draft-tokens": 3,
    }
    assert m["workloads"] == DEMO["workloads"] and m["objective"] == DEMO["objective"]
    planned = plan(m)
    assert len(planned.valid()) == 4 and not got.dropped
    # The off setting is the winner's own launch: the same config id as in the base run's plan.
    base_ids = {c.id for c in plan(copy.deepcopy(DEMO)).valid()}
    off = next(c for c in planned.valid() if c.point["speculative"] == "off")
    assert off.id in base_ids
    assert got.base_config == {"id": "cwin", "host": "node1", "flags": winner({})["flags"], "setting": "off"}


def test_a_speculative_winner_keeps_its_own_bundle_and_drops_its_resolved_flags():
    got = stage.stage_plan(
        request(steps=[3]), copy.deepcopy(DEMO), winner({"speculative": "mtp3"}, True), "x"
    )
    assert "speculative-algorithm" not in got.matrix["base"]
    assert got.matrix["bundles"]["speculative"]["s3k1d4"]["speculative-algorithm"] == "NEXTN"
    assert "speculative-moe-runner-backend" not in got.matrix["bundles"]["speculative"]["s3k1d4"]
    assert got.base_config["setting"] == "on (EAGLE steps=3, topk=1, draft=4)"


def test_loads_make_closed_loops_and_the_objective_is_the_target():
    got = stage.stage_plan(
        request(loads=[48, 8], target=8, output_len=64), copy.deepcopy(DEMO), winner({}), "x"
    )
    assert [
        (w["name"], w["concurrency"], w["num_prompts"], w["input_len"], w["output_len"])
        for w in got.matrix["workloads"]
    ] == [("c48", 48, 96, 256, 64), ("c8", 8, 16, 256, 64)]
    assert got.matrix["objective"] == {"workload": "c8", "metric": "output_throughput", "goal": "max"}
    first = stage.stage_plan(request(loads=[48, 8]), copy.deepcopy(DEMO), winner({}), "x")
    assert first.matrix["objective"]["workload"] == "c48"


def test_topk_grid_and_draft_tokens():
    got = stage.stage_plan(request(steps=[2], topk=[1, 2]), copy.deepcopy(DEMO), winner({}), "x")
    assert got.matrix["axes"]["speculative"] == ["off", "s2k1d3", "s2k2d4"]
    # With topk 1 SGLang uses steps + 1 draft tokens: other counts are left out of the grid.
    got = stage.stage_plan(
        request(steps=[2], topk=[1, 2], draft_tokens=[3, 4]), copy.deepcopy(DEMO), winner({}), "x"
    )
    assert got.matrix["axes"]["speculative"] == ["off", "s2k1d3", "s2k2d3", "s2k2d4"]


def test_settings_the_planner_refuses_are_dropped_with_the_reason():
    base = copy.deepcopy(DEMO)
    # A draft MoE runner that is SM100-only: every setting on is pruned on this SM120 matrix.
    base["bundles"]["speculative"]["mtp3"]["speculative-moe-runner-backend"] = "flashinfer_trtllm"
    with pytest.raises(
        BadInput, match=r"no speculative setting of the grid plans on this config: s1k1d2: pruned"
    ):
        stage.stage_plan(request(), base, winner({}), "x")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"steps": [0]}, "--steps 0: give whole numbers >= 1"),
        ({"topk": []}, "--steps and --topk need at least one value each"),
        ({"steps": [2], "draft_tokens": [7]}, "--draft-tokens: with --topk 1 SGLang uses steps \\+ 1"),
        ({"steps": list(range(1, 8)), "topk": [1, 2]}, "the speculative grid has 14 settings; at most 12"),
        ({"loads": [0]}, "--load 0: a load is a concurrency"),
        ({"loads": [8], "target": 16}, "--target 16: not one of the loads given \\(8\\)"),
        ({"target": 8}, "--target 8: only with --load"),
        ({"loads": [8], "num_prompts": 0}, "--num-prompts 0: give a whole number >= 1"),
    ],
)
def test_bad_input_is_one_line_naming_the_value(kw, message):
    with pytest.raises(BadInput, match=message):
        stage.stage_plan(request(**kw), copy.deepcopy(DEMO), winner({}), "x")


def test_an_unknown_base_run_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    with pytest.raises(BadInput, match="base run r-none: no results database"):
        stage.base_winner("r-none")
