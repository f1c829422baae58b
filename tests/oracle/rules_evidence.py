"""Run the rule probes behind docs/sglang-rules-evidence.md through the oracle.

    .venv/bin/python tests/oracle/rules_evidence.py > build/oracle/evidence.md

For every probe, release and GPU it prints what SGLang's argument processing does:
`ERR <type>: <message> @ <source line>` or the final values of the flags the probe
watches. The doc quotes this output; rerun it after a release bump.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Imported as tests.oracle.* (pytest): siblings from the package, one copy each; run as a
# script or imported by its bare name (scripts/): siblings by their bare names too.
if __package__:
    from tests.oracle import sglang_oracle
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import sglang_oracle

BASE = ["--model-path", str(sglang_oracle.QWEN35_NVFP4), "--tp-size", "8"]
FP4 = ["--quantization", "modelopt_fp4"]
NEXTN = ["--speculative-algorithm", "NEXTN"]
SPEC = [*NEXTN, "--speculative-num-steps", "3", "--speculative-eagle-topk", "1"]
# 0.5.9 spells the mamba strategy flag differently (renamed in 0.5.23).
MAMBA = {"0.5.23": "--mamba-radix-cache-strategy", "0.5.9": "--mamba-scheduler-strategy"}

# (probe id, extra argv (MAMBA placeholder "{mamba}"), flags to show)
PROBES: list[tuple[str, list[str], list[str]]] = [
    ("moe-auto+fp4", FP4, ["moe-runner-backend", "fp4-gemm-backend", "quantization"]),
    ("moe-auto-no-quant", [], ["moe-runner-backend", "fp4-gemm-backend", "quantization"]),
    ("moe-flashinfer_trtllm", [*FP4, "--moe-runner-backend", "flashinfer_trtllm"], ["moe-runner-backend"]),
    (
        "moe-flashinfer_trtllm_routed",
        [*FP4, "--moe-runner-backend", "flashinfer_trtllm_routed"],
        ["moe-runner-backend"],
    ),
    ("moe-flashinfer_cutedsl", [*FP4, "--moe-runner-backend", "flashinfer_cutedsl"], ["moe-runner-backend"]),
    ("moe-cutlass", [*FP4, "--moe-runner-backend", "cutlass"], ["moe-runner-backend"]),
    ("moe-triton", [*FP4, "--moe-runner-backend", "triton"], ["moe-runner-backend"]),
    ("moe-marlin", [*FP4, "--moe-runner-backend", "marlin"], ["moe-runner-backend"]),
    ("fp4-flashinfer_trtllm", [*FP4, "--fp4-gemm-backend", "flashinfer_trtllm"], ["fp4-gemm-backend"]),
    ("fp4-flashinfer_cutedsl", [*FP4, "--fp4-gemm-backend", "flashinfer_cutedsl"], ["fp4-gemm-backend"]),
    ("fp4-flashinfer_cudnn", [*FP4, "--fp4-gemm-backend", "flashinfer_cudnn"], ["fp4-gemm-backend"]),
    ("fp4-flashinfer_cutlass", [*FP4, "--fp4-gemm-backend", "flashinfer_cutlass"], ["fp4-gemm-backend"]),
    ("fp4-marlin", [*FP4, "--fp4-gemm-backend", "marlin"], ["fp4-gemm-backend"]),
    (
        "cutlass-moe+ep2",
        [*FP4, "--moe-runner-backend", "flashinfer_cutlass", "--ep-size", "2"],
        ["moe-runner-backend", "ep-size"],
    ),
    (
        "cutlass-moe+fp8",
        ["--quantization", "fp8", "--moe-runner-backend", "flashinfer_cutlass"],
        ["moe-runner-backend", "quantization"],
    ),
    (
        "cutedsl-moe+fp8",
        ["--quantization", "fp8", "--moe-runner-backend", "flashinfer_cutedsl"],
        ["moe-runner-backend", "quantization"],
    ),
    (
        "spec-moe-trtllm",
        [*FP4, *SPEC, "{mamba}", "extra_buffer", "--speculative-moe-runner-backend", "flashinfer_trtllm"],
        ["speculative-moe-runner-backend"],
    ),
    (
        "spec-copies-moe-trtllm",
        [*FP4, *SPEC, "{mamba}", "extra_buffer", "--moe-runner-backend", "flashinfer_trtllm"],
        ["moe-runner-backend", "speculative-moe-runner-backend"],
    ),
    (
        "spec-copies-moe-cutlass",
        [*FP4, *SPEC, "{mamba}", "extra_buffer", "--moe-runner-backend", "flashinfer_cutlass"],
        ["moe-runner-backend", "speculative-moe-runner-backend"],
    ),
    ("attn-default", FP4, ["attention-backend", "prefill-attention-backend", "decode-attention-backend"]),
    ("attn-triton", [*FP4, "--attention-backend", "triton"], ["attention-backend"]),
    ("attn-flashinfer", [*FP4, "--attention-backend", "flashinfer"], ["attention-backend"]),
    ("attn-fa3", [*FP4, "--attention-backend", "fa3"], ["attention-backend"]),
    ("attn-fa4", [*FP4, "--attention-backend", "fa4"], ["attention-backend"]),
    ("attn-trtllm_mha", [*FP4, "--attention-backend", "trtllm_mha"], ["attention-backend"]),
    ("attn-torch_native", [*FP4, "--attention-backend", "torch_native"], ["attention-backend"]),
    ("attn-flex", [*FP4, "--attention-backend", "flex_attention"], ["attention-backend"]),
    (
        "attn-flex+spec",
        [*FP4, "--attention-backend", "flex_attention", *SPEC, "{mamba}", "extra_buffer"],
        ["attention-backend"],
    ),
    (
        "prefill-trtllm_mha",
        [*FP4, "--prefill-attention-backend", "trtllm_mha", "--decode-attention-backend", "triton"],
        ["prefill-attention-backend", "decode-attention-backend"],
    ),
    (
        "decode-trtllm_mha",
        [*FP4, "--prefill-attention-backend", "triton", "--decode-attention-backend", "trtllm_mha"],
        ["prefill-attention-backend", "decode-attention-backend"],
    ),
    (
        "trtllm_mha+fp8kv",
        [*FP4, "--attention-backend", "trtllm_mha", "--kv-cache-dtype", "fp8_e4m3"],
        ["attention-backend", "kv-cache-dtype"],
    ),
    (
        "trtllm_mha+spec-topk2",
        [
            *FP4,
            "--attention-backend",
            "trtllm_mha",
            *NEXTN,
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "2",
            "--speculative-num-draft-tokens",
            "6",
            "{mamba}",
            "extra_buffer",
        ],
        ["attention-backend", "speculative-eagle-topk"],
    ),
    ("nextn-plain", [*FP4, *NEXTN], ["speculative-algorithm", "{mamba}", "disable-radix-cache"]),
    (
        "nextn-extra_buffer",
        [*FP4, *NEXTN, "{mamba}", "extra_buffer"],
        [
            "speculative-algorithm",
            "speculative-num-steps",
            "speculative-eagle-topk",
            "speculative-num-draft-tokens",
            "{mamba}",
            "max-running-requests",
        ],
    ),
    (
        "nextn-no-radix",
        [*FP4, *NEXTN, "--disable-radix-cache"],
        ["speculative-algorithm", "{mamba}", "disable-radix-cache"],
    ),
    (
        "nextn-extra_buffer+no-radix",
        [*FP4, *NEXTN, "{mamba}", "extra_buffer", "--disable-radix-cache"],
        ["{mamba}", "disable-radix-cache"],
    ),
    (
        "nextn-3-1-explicit",
        [*FP4, *SPEC, "{mamba}", "extra_buffer"],
        ["speculative-algorithm", "speculative-num-draft-tokens", "max-running-requests"],
    ),
    (
        "nextn-3-1-draft6",
        [*FP4, *SPEC, "--speculative-num-draft-tokens", "6", "{mamba}", "extra_buffer"],
        ["speculative-num-draft-tokens"],
    ),
    (
        "nextn-topk-without-steps",
        [*FP4, *NEXTN, "--speculative-eagle-topk", "1", "{mamba}", "extra_buffer"],
        ["speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens"],
    ),
    (
        "nextn-extra_buffer-track-interval-small",
        [*FP4, *SPEC, "{mamba}", "extra_buffer", "--mamba-track-interval", "2"],
        ["mamba-track-interval", "speculative-num-draft-tokens"],
    ),
    ("nnodes-3", [*FP4, "--nnodes", "3"], ["nnodes"]),
    ("dp-attn-3", [*FP4, "--dp-size", "3", "--enable-dp-attention"], ["dp-size"]),
    ("dp-attn-2", [*FP4, "--dp-size", "2", "--enable-dp-attention"], ["dp-size"]),
    ("custom-ar", FP4, ["disable-custom-all-reduce"]),
    (
        "memory-defaults",
        FP4,
        ["mem-fraction-static", "max-running-requests", "chunked-prefill-size", "cuda-graph-max-bs"],
    ),
    ("old-mamba-flag", [*FP4, "--mamba-scheduler-strategy", "extra_buffer"], []),
    ("kv-fp4", [*FP4, "--kv-cache-dtype", "fp4_e2m1"], ["kv-cache-dtype"]),
]


def expand(args: list[str], version: str) -> list[str]:
    return [MAMBA[version] if a == "{mamba}" else a for a in args]


def show(result: dict, flags: list[str], version: str) -> str:
    if not result["ok"]:
        return f"ERR {result['error_type']}: {result['error']} @ {result['where']}"
    values = result["values"]
    names = [MAMBA[version][2:] if f == "{mamba}" else f for f in flags]
    return "ok " + ", ".join(f"{n}={values.get(n, '(no such flag)')!r}" for n in names)


def main() -> int:
    for version in sglang_oracle.VERSIONS:
        for gpu in sglang_oracle.GPUS:
            argvs = [BASE + expand(extra, version) for _, extra, _ in PROBES]
            results = sglang_oracle.evaluate(version, gpu, argvs)
            print(f"\n## sglang {version} on {gpu}\n")
            for (probe, _, flags), result in zip(PROBES, results, strict=True):
                print(f"- `{probe}`: {show(result, flags, version)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
