"""A results line records its hardware group (issue 25): `hardware` holds the GPU model, count,
SM and interconnect, which the node fills from the GPU facts the sweep module receives
(`facts.gpu`, bwtune_gpu), so a 4-GPU SM120 result is told from an 8-GPU one by its line.

The node's sweep runs here on the real planner, line builder and results file, with its
launches faked (no server); the stand-in's facts come from its fake nvidia-smi."""

from __future__ import annotations

import copy
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import bench_client
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import (
    results_contract,
    results_fields,
    results_line,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._facts import gpu_info
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_core, sweep_runner
from bwtune.analysis.hardware_group import HardwareGroup
from bwtune.standin import fake_smi
from bwtune.standin.profile import PROFILE_ENV

MATRIX: dict[str, Any] = {
    "model": {"path": "/models/qwen", "quantization": "modelopt_fp4"},
    "hardware": {"gpu": "sm120"},
    "sglang": {"version": "0.5.23"},
    "base": {"quantization": "modelopt_fp4"},
    "axes": {"case": ["a", "b", "pruned"]},
    "bundles": {
        "case": {
            "a": {"moe-runner-backend": "flashinfer_cutlass", "cuda-graph-max-bs-decode": 16},
            "b": {"cuda-graph-max-bs-decode": 24},
            "pruned": {"moe-runner-backend": "flashinfer_trtllm", "cuda-graph-max-bs-decode": 96},
        }
    },
    "workloads": [{"name": "single", "input_len": 32, "output_len": 16, "concurrency": 1, "num_prompts": 3}],
    "objective": {"workload": "single", "metric": "output_throughput", "goal": "max"},
}


def standin_gpu_facts(
    monkeypatch: pytest.MonkeyPatch, profile: str = "rtx-pro-6000x8-qwen35-397b-nvfp4"
) -> dict:
    """bwtune_gpu as the gpu_facts module gathers it on a stand-in node (its fake nvidia-smi)."""
    monkeypatch.setenv(PROFILE_ENV, profile)
    return gpu_info.gather(lambda argv: fake_smi.run(argv[1:]), "nvidia-smi")


def first_gpus(facts: dict, count: int) -> dict:
    """The same node's facts with only its first `count` GPUs (a smaller host of that model)."""
    smaller = copy.deepcopy(facts)
    smaller["gpus"] = smaller["gpus"][:count]
    smaller["count"] = count
    smaller["message"] = f"{count} x {smaller['gpus'][0]['name']}"
    return smaller


def fake_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    def launch(self: sweep_runner.Sweep, config: dict[str, Any], progress: Any) -> dict[str, Any]:
        metrics = {
            w["name"]: {
                "n": 1,
                "values": {"output_throughput": 100.0},
                "repetitions": [{"output_throughput": 100.0}],
                "workload": bench_client.Workload.from_dict(w).to_dict(),
            }
            for w in self.workloads[config["id"]]
        }
        return self._line(config, "ok", metrics=metrics, started_at=sweep_core.now())

    monkeypatch.setattr(sweep_runner.Sweep, "launch", launch)
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # keep pytest's own SIGTERM handling


def sweep_lines(tmp_path: Path, facts: dict[str, Any] | None, tp: int) -> list[dict[str, Any]]:
    """Every line a node's sweep writes to its results file, given the module's `facts`."""
    matrix = copy.deepcopy(MATRIX)
    matrix["base"]["tp-size"] = tp
    opts = sweep_runner.SweepOptions(
        matrix=matrix,
        results_path=str(tmp_path / "node" / "r1" / "results.jsonl"),
        node_lock=str(tmp_path / "node.lock"),
        run_id="r1",
        node="node-a",
        strategy="grid",
        simulated=True,
        facts=facts,
    )
    the_sweep = sweep_runner.Sweep(opts, sweep_runner.make_plan(opts))
    try:
        outcome = the_sweep.run()
    finally:
        for fd in (getattr(the_sweep, "_lock", None), getattr(the_sweep, "_node_lock", None)):
            if fd is not None:
                os.close(fd)
    assert not outcome.get("error"), outcome.get("error")
    return [json.loads(raw) for raw in Path(opts.results_path).read_text().splitlines() if raw.strip()]


# ---------------------------------------------------------------------- the field, declared once


def test_hardware_is_one_declared_field_shown_in_the_json_view() -> None:
    [field] = [f for f in results_fields.FIELDS if f.name == "hardware"]
    assert not field.required and field.default is None  # older lines lack it
    assert field.json == "hardware" and "hardware" in results_fields.VIEW_ORDER
    assert "hardware" in results_contract.LINE_DEFAULTS
    assert results_contract.make_line(run_id="r1", host="h", config_id="c1", status="ok")["hardware"] is None


# ---------------------------------------------------------------------- from the facts


def test_hardware_of_the_standin_facts_has_every_part(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = standin_gpu_facts(monkeypatch)
    assert facts["available"] and facts["count"] == len(facts["gpus"])
    hardware = results_line.hardware_of(facts, "sm120")
    assert hardware == {
        "gpu_model": facts["gpus"][0]["name"],
        "gpu_count": facts["count"],
        "sm": "sm120",
        "interconnect": facts["interconnect"],
    }
    assert None not in (hardware["gpu_model"], hardware["gpu_count"], hardware["interconnect"])


def test_hardware_of_no_facts_knows_only_the_lines_sm() -> None:
    for facts in (None, {}, "garbage", gpu_info.unavailable("nvidia_smi_missing", "no driver")):
        assert results_line.hardware_of(facts, "sm120") == {
            "gpu_model": None, "gpu_count": None, "sm": "sm120", "interconnect": None,
        }  # fmt: skip


def test_hardware_of_gpus_of_two_kinds_names_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = standin_gpu_facts(monkeypatch)
    facts["gpus"][1]["name"] = "NVIDIA B200"
    hardware = results_line.hardware_of(facts, "sm120")
    assert hardware["gpu_model"] is None and hardware["gpu_count"] == facts["count"]
    facts["sm"] = "mixed"
    assert results_line.hardware_of(facts)["sm"] is None  # no one SM: not made up
    assert (
        results_line.hardware_of(dict(facts, sm="sm120"))["sm"] == "sm120"
    )  # the facts' SM without a plan's


# ---------------------------------------------------------------------- the validator


@pytest.mark.parametrize(
    "hardware, named",
    [
        ({"gpu_count": "8"}, "hardware.gpu_count"),
        ({"gpu_count": True}, "hardware.gpu_count"),
        ({"gpu_count": 0}, "hardware.gpu_count"),
        ({"gpu_model": ""}, "hardware.gpu_model"),
        ({"interconnect": 3}, "hardware.interconnect"),
        ({"sm": ["sm120"]}, "hardware.sm"),
        ({"gpus": 8}, "unknown parts gpus"),
        ([8, "sm120"], "hardware must be an object or null"),
    ],
)
def test_a_bad_hardware_is_refused_naming_the_part(hardware: Any, named: str) -> None:
    line = results_contract.make_line(run_id="r1", host="h", config_id="c1", status="ok", hardware=hardware)
    with pytest.raises(results_contract.ResultsFormatError, match=named) as caught:
        results_contract.validate_line(line, "r.jsonl:3")
    assert str(caught.value).startswith("r.jsonl:3: ") and "\n" not in str(caught.value)


def test_an_old_line_without_hardware_still_validates() -> None:
    line = results_contract.make_line(run_id="r1", host="h", config_id="c1", status="ok", gpu="sm120")
    del line["hardware"]
    results_contract.validate_line(line)
    assert HardwareGroup.of_result(line).sm == "sm120"


# ---------------------------------------------------------------------- the node writes it


def test_the_node_records_the_hardware_of_its_facts_on_every_line(tmp_path, monkeypatch) -> None:
    eight = standin_gpu_facts(monkeypatch)
    four = first_gpus(eight, 4)
    fake_launches(monkeypatch)
    lines = sweep_lines(tmp_path, {"gpu": four, "stack": {"fingerprint": "f" * 16}}, tp=4)
    assert {line["status"] for line in lines} == {"ok", "pruned"}  # launched and not, finals too
    for line in lines:
        results_contract.validate_line(line)
        assert line["hardware"] == {
            "gpu_model": eight["gpus"][0]["name"],
            "gpu_count": 4,
            "sm": line["gpu"],
            "interconnect": four["interconnect"],
        }
        # The line alone gives the group the host's facts give.
        node = HardwareGroup.of_facts({"bwtune_gpu": four, "bwtune_stack": {"fingerprint": "f" * 16}})
        assert HardwareGroup.of_result(line) == node


def test_a_4_and_an_8_gpu_node_write_lines_of_two_groups(tmp_path, monkeypatch) -> None:
    eight = standin_gpu_facts(monkeypatch)
    fake_launches(monkeypatch)
    big = sweep_lines(tmp_path / "big", {"gpu": eight}, tp=8)
    small = sweep_lines(tmp_path / "small", {"gpu": first_gpus(eight, 4)}, tp=4)
    assert {line["gpu"] for line in big + small} == {"sm120"}  # the SM tag alone: one group
    big_group, small_group = HardwareGroup.of_result(big[0]), HardwareGroup.of_result(small[0])
    assert not big_group.same_hardware(small_group)
    assert big_group.hardware_differences(small_group) == [("GPUs", 8, 4)]


def test_a_sweep_without_facts_records_the_plans_sm_only(tmp_path, monkeypatch) -> None:
    fake_launches(monkeypatch)
    for line in sweep_lines(tmp_path, None, tp=8):
        assert line["hardware"] == {"gpu_model": None, "gpu_count": None, "sm": "sm120", "interconnect": None}
