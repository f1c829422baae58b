"""HardwareGroup from results lines alone (issue 25): a line's `hardware` gives every part of
its group, so a 4-GPU and an 8-GPU result of one SM are two groups without any host facts;
a line without it (an older node's) falls back to today's rule: its SM tag and fingerprint,
the other parts from the host facts the database kept, where it kept any."""

from __future__ import annotations

from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from bwtune.analysis.hardware_group import HardwareGroup

MODEL = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def line(
    host: str, count: int | None, *, model: str | None = MODEL, link: str | None = "pcie"
) -> dict[str, Any]:
    hardware = {"gpu_model": model, "gpu_count": count, "sm": "sm120", "interconnect": link}
    made = results_contract.make_line(
        run_id="r1", host=host, config_id="c0123456789", status="ok", gpu="sm120",
        stack_fingerprint="3f9a00", hardware=hardware,
    )  # fmt: skip
    results_contract.validate_line(made)
    return made


def old_line(host: str) -> dict[str, Any]:
    made = line(host, 8)
    del made["hardware"]
    return made


def test_a_4_and_an_8_gpu_result_of_one_sm_are_two_groups_from_the_lines_alone() -> None:
    eight, four = HardwareGroup.of_result(line("big", 8)), HardwareGroup.of_result(line("small", 4))
    assert eight == HardwareGroup(gpu_model=MODEL, gpu_count=8, sm="sm120", interconnect="pcie",
                                  stack_fingerprint="3f9a00")  # fmt: skip
    assert eight.sm == four.sm == "sm120"
    assert not eight.same_hardware(four) and not eight.same_stack(four)
    assert eight.hardware_differences(four) == [("GPUs", 8, 4)]
    assert eight.key() != four.key() and eight.missing() == []


def test_two_lines_of_the_same_hardware_are_one_group() -> None:
    one, other = HardwareGroup.of_result(line("a", 8)), HardwareGroup.of_result(line("b", 8))
    assert one == other and one.same_stack(other) and one.key() == other.key()


def test_the_model_and_interconnect_recorded_tell_groups_apart_too() -> None:
    base = HardwareGroup.of_result(line("a", 8))
    assert base.hardware_differences(HardwareGroup.of_result(line("b", 8, link="nvlink"))) == [
        ("interconnect", "pcie", "nvlink")
    ]
    assert not base.same_hardware(HardwareGroup.of_result(line("b", 8, model="NVIDIA RTX PRO 6000D")))


def test_an_old_line_falls_back_to_the_sm_as_before() -> None:
    old = HardwareGroup.of_result(old_line("a"))
    assert (old.sm, old.gpu_count, old.gpu_model, old.interconnect) == ("sm120", None, None, None)
    # Unknown parts are not compared: an older result still counts for either host size.
    assert old.same_hardware(HardwareGroup.of_result(line("b", 4)))
    assert old.same_hardware(HardwareGroup.of_result(line("c", 8)))


def test_an_old_line_takes_the_parts_the_database_kept_of_its_host() -> None:
    kept = {"count": 4, "sm": "sm120", "interconnect": "nvlink", "gpus": f"4 x {MODEL}"}
    old = HardwareGroup.of_result(old_line("a"), kept)
    assert (old.gpu_count, old.gpu_model, old.interconnect) == (4, MODEL, "nvlink")


def test_the_recorded_parts_win_over_kept_facts_and_fill_only_what_it_lacks() -> None:
    kept = {"count": 4, "sm": "sm120", "interconnect": "nvlink", "gpus": f"4 x {MODEL}"}
    group = HardwareGroup.of_result(line("a", 8, link=None), kept)
    assert (group.gpu_count, group.interconnect) == (8, "nvlink")
    # Facts of other GPUs than the line's (a re-imaged host) give it nothing.
    other = HardwareGroup.of_result(line("a", 8, link=None), {**kept, "sm": "sm100"})
    assert other.interconnect is None and other.sm == "sm120"
