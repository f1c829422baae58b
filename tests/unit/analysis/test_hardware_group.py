"""One definition of a hardware group: built from real nvidia-smi captures (through
gpu_info.build_facts, as the gpu_facts module returns them) and from a results line with
what the results database kept of its host; its grains compared part by part."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import gpu_info
from bwtune.analysis.hardware_group import HardwareGroup
from bwtune.store import gpu_facts_summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"
CAPTURES = {
    "h200-2gpu": FIXTURES / "h200-2gpu" / "raw",
    "rtx-pro-6000-8gpu": FIXTURES / "rtx-pro-6000-8gpu",
    "b200-8gpu": FIXTURES / "b200-8gpu",
}
FP = "3f9a0c1d2e4b"


def gpu_facts(name: str) -> dict[str, Any]:
    d = CAPTURES[name]
    caps = d / "query-gpu-caps.out"
    return gpu_info.build_facts(
        (d / "nvidia-smi-q-x.out").read_text(),
        caps.read_text() if caps.exists() else None,
        (d / "nvidia-smi-topo-m.out").read_text(),
    )


def host(name: str, fingerprint: str | None = FP) -> dict[str, Any]:
    return {"bwtune_gpu": gpu_facts(name), "bwtune_stack": {"fingerprint": fingerprint}}


def test_a_hosts_group_has_every_part_from_its_facts() -> None:
    group = HardwareGroup.of_facts(host("h200-2gpu"))
    assert group == HardwareGroup(
        gpu_model="NVIDIA H200", gpu_count=2, sm="sm90", interconnect="nvlink", stack_fingerprint=FP
    )
    assert group.missing() == []
    assert group.key() == f"sm90|2 x NVIDIA H200|nvlink|stack {FP}"


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_a_result_with_what_the_database_kept_of_its_host_is_the_hosts_group(name: str) -> None:
    """The line records the SM and the fingerprint; the hosts table's summary the rest."""
    facts = gpu_facts(name)
    line = {"gpu": facts["sm"], "stack_fingerprint": FP}
    assert HardwareGroup.of_result(line, gpu_facts_summary(facts)) == HardwareGroup.of_facts(host(name))


def test_a_line_alone_knows_its_sm_and_stack_only() -> None:
    group = HardwareGroup.of_result({"gpu": "sm120", "stack_fingerprint": FP})
    assert group == HardwareGroup(sm="sm120", stack_fingerprint=FP)
    assert group.missing() == ["GPU count", "GPU model", "interconnect"]


def test_kept_facts_of_other_gpus_than_the_lines_are_not_its_own() -> None:
    kept = gpu_facts_summary(gpu_facts("b200-8gpu"))  # sm100: the host was re-imaged since
    assert HardwareGroup.of_result({"gpu": "sm120"}, kept) == HardwareGroup(sm="sm120")


def test_same_hardware_needs_the_sm_and_every_part_both_know() -> None:
    eight = HardwareGroup(gpu_model="X", gpu_count=8, sm="sm120", interconnect="pcie", stack_fingerprint=FP)
    assert eight.same_hardware(eight) and eight.same_stack(eight)
    four = dataclasses.replace(eight, gpu_count=4)
    assert not eight.same_hardware(four), "a 4-GPU host is not an 8-GPU one of the same SM"
    assert not eight.same_hardware(dataclasses.replace(eight, interconnect="nvlink"))
    assert not eight.same_hardware(dataclasses.replace(eight, gpu_model="Y"))
    assert not eight.same_hardware(dataclasses.replace(eight, sm="sm100"))
    assert eight.hardware_differences(four) == [("GPUs", 8, 4)]
    # A part one side does not record is not compared; the SM always is.
    sm_only = HardwareGroup(sm="sm120", stack_fingerprint=FP)
    assert sm_only.same_hardware(eight) and eight.same_hardware(sm_only) and sm_only.same_hardware(four)
    assert not HardwareGroup(stack_fingerprint=FP).same_hardware(eight)


def test_same_stack_is_same_hardware_and_the_same_fingerprint() -> None:
    a = HardwareGroup.of_facts(host("rtx-pro-6000-8gpu"))
    assert a.same_stack(HardwareGroup.of_facts(host("rtx-pro-6000-8gpu")))
    other_stack = HardwareGroup.of_facts(host("rtx-pro-6000-8gpu", fingerprint="000000000000"))
    assert a.same_hardware(other_stack) and not a.same_stack(other_stack)
    assert a.key() != other_stack.key() and a.hardware_key() == other_stack.hardware_key()


def test_hosts_without_usable_gpus_have_no_hardware_parts() -> None:
    none = HardwareGroup.of_facts({"bwtune_gpu": gpu_info.unavailable(gpu_info.NO_GPUS, "no GPUs")})
    assert none == HardwareGroup()
    mixed = {**gpu_facts("h200-2gpu"), "sm": "mixed", "sms": ["sm90", "sm100"]}
    assert HardwareGroup.of_facts({"bwtune_gpu": mixed}).sm is None


def test_the_group_is_built_by_name_only() -> None:
    with pytest.raises(TypeError):
        HardwareGroup("sm120", FP)  # type: ignore[misc]
