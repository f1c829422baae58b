"""Plan a 10,000-combination matrix and print how long it takes (target: under 2 s).

    .venv/bin/python benchmarks/plan_10k.py [--repeat 3]

The matrix is the SM120 example widened to 10 x 5 x 4 x 5 x 10 = 10,000 points, so every
rule, the normalization, the ids and the argv are computed for each of them.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path

import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils import planner

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "qwen35-397b-nvfp4-sm120.yml"


def matrix_10k() -> dict:
    matrix = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    matrix["base"].pop("mem-fraction-static")
    matrix["axes"] = {
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    matrix = matrix_10k()
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = planner.plan(matrix)
        times.append(time.perf_counter() - start)
    s = result.summary
    print(
        f"planned {s['combinations']} combinations ({s['valid']} valid, {s['pruned']} pruned, "
        f"{s['duplicates']} duplicates) in {min(times):.3f} s (best of {args.repeat}; "
        f"median {statistics.median(times):.3f} s)"
    )


if __name__ == "__main__":
    main()
