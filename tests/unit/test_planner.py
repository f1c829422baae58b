"""The planner: matrix -> configs (valid / pruned / duplicate) -> launches, and the plan JSON."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import planner
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import catalog

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yml"))


def load(name: str) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((REPO / "examples" / name).read_text()))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_point_not_excluded_appears_exactly_once(path: Path) -> None:
    matrix = yaml.safe_load(path.read_text())
    result = planner.plan(matrix)
    parsed = planner.matrix_mod.parse(matrix, catalog.get_table)
    assert [c.point for c in result.configs] == [p for p, _ in parsed.points()]
    ids = [c.id for c in result.configs]
    assert len(ids) == len(set(ids)), "every config of a plan has its own id"
    s = result.summary
    assert s["expanded"] == len(result.configs) == s["valid"] + s["pruned"] + s["duplicates"]
    assert s["launches"] == s["valid"] == len(result.launches)


def test_the_sm120_example_prunes_sm100_kernels_with_reasons() -> None:
    result = planner.plan(load("qwen35-397b-nvfp4-sm120.yml"))
    by_moe: dict[str, set[str]] = {}
    for c in result.configs:
        by_moe.setdefault(c.point["moe-runner-backend"], set()).add(c.status)
        assert (c.status == planner.PRUNED) == bool(c.reasons)
    assert by_moe["flashinfer_trtllm"] == {planner.PRUNED}
    assert by_moe["triton"] == {planner.PRUNED}
    assert planner.VALID in by_moe["flashinfer_cutlass"]
    trtllm = next(c for c in result.configs if c.point["moe-runner-backend"] == "flashinfer_trtllm")
    assert trtllm.reasons[0].rule == "sm100-only-moe-runner" and trtllm.reasons[0].kind == "hardware"


def test_configs_equal_after_normalization_are_duplicates_of_the_first() -> None:
    result = planner.plan(load("demo.yml"))
    dups = [c for c in result.configs if c.status == planner.DUPLICATE]
    assert dups, "auto and flashinfer_cutlass normalize alike on SM120 with modelopt_fp4"
    by_id = {c.id: c for c in result.configs}
    for dup in dups:
        original = by_id[dup.duplicate_of or ""]
        assert original.status == planner.VALID
        assert original.flags == dup.flags and original.point != dup.point
        assert dup.point["moe-runner-backend"] == "auto"
        assert original.point["moe-runner-backend"] == "flashinfer_cutlass"


def test_the_same_matrix_on_sm100_keeps_what_sm120_prunes() -> None:
    matrix = load("qwen35-397b-nvfp4-sm120.yml")
    sm100 = planner.plan(matrix, gpu="sm100")
    trtllm = [c for c in sm100.configs if c.point["moe-runner-backend"] == "flashinfer_trtllm"]
    assert any(c.status == planner.VALID for c in trtllm)
    assert sm100.gpu == "sm100"


def test_argv_is_a_list_of_words_with_the_model_first_and_a_stable_order() -> None:
    result = planner.plan(load("qwen35-397b-nvfp4-sm120.yml"))
    config = next(c for c in result.configs if c.point["speculative"] == "mtp3")
    argv = config.argv
    assert argv[:2] == ["--model-path", "/models/Qwen3.5-397B-A17B-NVFP4"]
    assert all(isinstance(w, str) for w in argv)
    assert argv[argv.index("--speculative-num-steps") + 1] == "3"
    assert argv[argv.index("--tp-size") + 1] == "8"
    names = [w for w in argv[2:] if w.startswith("--")]
    assert names == sorted(names)


def test_ids_hash_the_normalized_flags_independent_of_key_order() -> None:
    flags = {"tp-size": 8, "moe-runner-backend": "marlin", "quantization": "modelopt_fp4"}
    shuffled = dict(reversed(list(flags.items())))
    cid = planner.config_id(flags)
    assert cid == planner.config_id(shuffled)
    assert cid.startswith("c") and len(cid) == 11 and int(cid[1:], 16) >= 0
    assert cid != planner.config_id({**flags, "tp-size": 4})
    assert cid != planner.config_id(flags, {"tp-size": 8})  # a point tells alike configs apart


def test_ids_do_not_depend_on_where_the_checkpoint_lies() -> None:
    """Issue 20 #19: the same flags had one id in the repo and another elsewhere."""
    here, there = load("demo.yml"), load("demo.yml")
    there["model"]["path"] = "/srv/elsewhere/qwen35-397b-a17b-nvfp4"
    a, b = planner.plan(here), planner.plan(there)
    assert a.model_path != b.model_path
    assert [c.id for c in a.configs] == [c.id for c in b.configs]
    assert [c.argv[1] for c in b.configs] == [b.model_path] * len(b.configs)  # argv says where
    # The id is the hash of the normalized flags alone (docs/reports.md).
    first = next(c for c in a.configs if c.status == planner.VALID)
    text = json.dumps(first.flags, sort_keys=True, separators=(",", ":"), default=str)
    assert first.id == "c" + hashlib.sha256(text.encode()).hexdigest()[:10]


def test_plan_json_follows_the_contract() -> None:
    data = json.loads(json.dumps(planner.plan(load("demo.yml")).to_dict()))
    assert {"sglang_version", "gpu", "configs", "launches", "summary"} <= set(data)
    for config in data["configs"]:
        assert set(config) == {"id", "point", "flags", "argv", "status", "reasons", "duplicate_of"}
        for reason in config["reasons"]:
            assert set(reason) == {"rule", "kind", "message", "source"}
            assert reason["kind"] in ("sglang", "hardware")
    launch = data["launches"][0]
    assert [w["name"] for w in launch["workloads"]] == ["single", "c8"]
    valid_ids = [c["id"] for c in data["configs"] if c["status"] == "valid"]
    assert [launch["config"] for launch in data["launches"]] == valid_ids


def test_gpu_hours_come_from_the_matrix_estimates() -> None:
    matrix = load("demo.yml")
    result = planner.plan(matrix)
    launches = result.summary["launches"]
    # startup + each workload's estimate, on hardware.count GPUs each.
    per_launch = matrix["estimates"]["startup_s"] + sum(w["estimate_s"] for w in matrix["workloads"])
    assert result.summary["estimate"]["per_launch_s"] == per_launch
    gpus = matrix["hardware"]["count"]
    assert result.summary["estimate"]["gpu_hours"] == round(launches * per_launch * gpus / 3600, 2)


def test_auto_gpu_without_facts_is_a_clear_error() -> None:
    matrix = load("demo.yml")
    matrix["hardware"]["gpu"] = "auto"
    with pytest.raises(MatrixError, match="no facts") as caught:
        planner.plan(matrix)
    assert caught.value.path == ("hardware", "gpu")
    b200 = {"available": True, "sm": "sm100", "sms": ["sm100"], "message": "8 x NVIDIA B200"}
    assert planner.plan(matrix, facts={"gpu": b200}).gpu == "sm100"


def test_the_checkpoint_config_is_read_when_the_matrix_does_not_say(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["Qwen3_5MoeForConditionalGeneration"]})
    )
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "NVFP4"}}))
    matrix = load("demo.yml")
    matrix["model"] = {"path": str(tmp_path)}
    info = planner.model_info(planner.matrix_mod.parse(matrix, catalog.get_table), None)
    assert info.hybrid and info.quantization == "modelopt_fp4"
