"""`bwtune facts`: rows from the facts modules' output, and hosts grouped for shared sweeps."""

from __future__ import annotations

from typing import Any

from bwtune.commands.facts import host_row, sweep_groups


def facts(fingerprint: str = "3f9a0c1d2e4b", count: int = 8, sm: str = "sm120", **gpu: Any) -> dict[str, Any]:
    return {
        "bwtune_gpu": {
            "available": True,
            "message": f"{count} x NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "count": count,
            "sm": sm,
            **gpu,
            "driver_version": "580.159.04",
            "cuda_version": "13.0",
        },
        "bwtune_stack": {
            "fingerprint": fingerprint,
            "build_fingerprint": "a400606c593d",
            "torch": {"version": "2.9.1", "cuda": "12.9"},
            "sgl_kernel": {"sm_targets": ["sm_100a", "sm_120a"]},
            "sglang": {"version": "0.5.23"},
        },
    }


def test_a_row_has_every_column_from_the_facts() -> None:
    assert host_row("gpu1", facts(), simulated=False) == {
        "host": "gpu1",
        "GPUs": "8 x NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "sm": "sm120",
        "driver": "580.159.04",
        "CUDA": "13.0",
        "torch": "2.9.1",
        "sgl_kernel": "sm_100a,sm_120a",
        "sglang": "0.5.23",
        "stack": "a400606c593d",
        "fingerprint": "3f9a0c1d2e4b",
        # Not a column: the hardware group's key (these facts say no interconnect).
        "group": "sm120|8 x NVIDIA RTX PRO 6000 Blackwell Server Edition|?|stack 3f9a0c1d2e4b",
    }


def test_missing_gpus_and_stack_show_why_or_a_dash() -> None:
    row = host_row(
        "box", {"bwtune_gpu": {"available": False, "reason": "nvidia-smi-missing"}}, simulated=True
    )
    assert row["host"] == "box (simulated)"
    assert row["GPUs"] == "none (nvidia-smi-missing)"
    unknown = ("sm", "driver", "CUDA", "torch", "sgl_kernel", "sglang", "stack", "fingerprint")
    assert {row[k] for k in unknown} == {"-"}


def test_hosts_share_a_sweep_only_with_the_same_gpus_and_stack() -> None:
    rows = [
        host_row("a", facts(), False),
        host_row("b", facts(fingerprint="000000000000"), False),
        host_row("c", facts(), False),
        host_row("d", facts(count=4), False),
    ]
    assert sweep_groups(rows) == [["a", "c"], ["b"], ["d"]]


def test_an_other_interconnect_or_gpu_model_is_another_sweep_group() -> None:
    rows = [
        host_row("a", facts(interconnect="nvlink"), False),
        host_row("b", facts(interconnect="pcie"), False),
        host_row("c", facts(interconnect="nvlink", message="8 x NVIDIA B200"), False),
        host_row("d", facts(interconnect="nvlink"), False),
    ]
    assert sweep_groups(rows) == [["a", "d"], ["b"], ["c"]]
