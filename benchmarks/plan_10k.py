"""Plan a 10,000-combination matrix and print how long it takes (target: under 2 s).

    .venv/bin/python benchmarks/plan_10k.py [--repeat 3] [--facts]

--facts plans the same matrix with `gpu: auto` and `version: auto` against node facts whose
SGLang (0.5.24, a release without a generated table) lists its own parser's flags, so the
flags are checked against that parser and the rules apply by version range.

The matrix is the SM120 example widened to 10 x 5 x 4 x 5 x 10 = 10,000 points, so every
rule, the normalization, the ids and the argv are computed for each of them.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import planner
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import get_table
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.installed_flags import stack_flags

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "qwen35-397b-nvfp4-sm120.yml"


def widened_matrix(axes: dict[str, list[Any]]) -> dict[str, Any]:
    """The SM120 example with ``axes`` as its axes (mem-fraction-static moved from the base to
    an axis) and the speculative bundles mtp1, mtp2 and mtp3-no-radix beside its mtp3; no
    exclude. benchmarks/search_cost.py's wide matrix is built on it too."""
    matrix = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    matrix["base"].pop("mem-fraction-static")
    matrix["axes"] = {axis: list(values) for axis, values in axes.items()}
    mtp = matrix["bundles"]["speculative"]["mtp3"]
    matrix["bundles"]["speculative"].update(
        {
            "mtp1": {**mtp, "speculative-num-steps": 1, "speculative-num-draft-tokens": 2},
            "mtp2": {**mtp, "speculative-num-steps": 2, "speculative-num-draft-tokens": 3},
            "mtp3-no-radix": {**mtp, "disable-radix-cache": True},
        }
    )
    matrix["exclude"] = []
    return matrix


# The 10,000-point axes (10 x 5 x 4 x 5 x 10); search_cost.py's wide matrix takes fewer values of them.
AXES_10K: dict[str, list[Any]] = {
    "moe-runner-backend": [
        "auto",
        "flashinfer_cutlass",
        "flashinfer_trtllm",
        "flashinfer_trtllm_routed",
        "flashinfer_cutedsl",
        "triton",
        "cutlass",
        "marlin",
        "deep_gemm",
        "triton_kernel",
    ],
    "fp4-gemm-backend": ["auto", "flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_trtllm", "marlin"],
    "attention-backend": ["flashinfer", "triton", "trtllm_mha", "fa4"],
    "speculative": ["none", "mtp1", "mtp2", "mtp3", "mtp3-no-radix"],
    "mem-fraction-static": [round(0.80 + 0.01 * i, 2) for i in range(10)],
}


def matrix_10k() -> dict[str, Any]:
    return widened_matrix(AXES_10K)


def node_facts() -> dict:
    """An SM120 node with SGLang 0.5.24 installed (its parser: 0.5.23's flags)."""
    gpu = {"available": True, "sm": "sm120", "sms": ["sm120"], "message": "8 x NVIDIA RTX PRO 6000"}
    sglang = {"installed": True, "version": "0.5.24", "flags": stack_flags(get_table("0.5.23"))}
    return {"gpu": gpu, "stack": {"python": "python3", "sglang": sglang}, "checkpoint": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--facts", action="store_true", help="auto GPU and SGLang from node facts")
    args = parser.parse_args()
    matrix = matrix_10k()
    facts = None
    if args.facts:
        matrix["hardware"]["gpu"] = matrix["sglang"]["version"] = "auto"
        facts = node_facts()
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = planner.plan(matrix, facts=facts)
        times.append(time.perf_counter() - start)
    s = result.summary
    print(
        f"planned {s['combinations']} combinations ({s['valid']} valid, {s['pruned']} pruned, "
        f"{s['duplicates']} duplicates){' with node facts' if args.facts else ''} "
        f"in {min(times):.3f} s (best of {args.repeat}; "
        f"median {statistics.median(times):.3f} s)"
    )


if __name__ == "__main__":
    main()
