# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Rules of kind `hardware`: flags SGLang accepts that the GPU fails at model load or first forward."""

from __future__ import annotations

from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rule_model import (
    NVFP4_QUANTIZATIONS,
    NVFP4_SM90_MARLIN_SINCE,
    SM100_ONLY_FP4_GEMM,
    SM100_ONLY_MOE,
    Context,
    Rule,
    registry,
)

HARDWARE_RULES: list[Rule] = []
rule = registry(HARDWARE_RULES)


@rule(
    "sm100-only-moe-runner",
    "hardware",
    "FlashInfer 0.7.2 trtllm-gen / CuTe DSL MoE kernels are built for SM100-family only",
    gpus=("sm120", "sm90"),
)
def _sm100_only_moe(f: dict[str, Any], ctx: Context) -> str | None:
    """flashinfer_trtllm(_routed) and flashinfer_cutedsl MoE kernels exist for SM100 only."""
    moe = f.get("moe-runner-backend")
    if moe in SM100_ONLY_MOE:
        return f"--moe-runner-backend {moe} has SM100-only kernels; fails at load on {ctx.gpu}"
    draft = f.get("speculative-moe-runner-backend")
    if ctx.speculative(f) and draft in SM100_ONLY_MOE:
        return f"--speculative-moe-runner-backend {draft} has SM100-only kernels; fails on {ctx.gpu}"
    return None


@rule(
    "sm100-only-fp4-gemm",
    "hardware",
    "FlashInfer 0.7.2 trtllm / CuTe DSL FP4 GEMM are built for SM100-family only",
    gpus=("sm120", "sm90"),
)
def _sm100_only_fp4(f: dict[str, Any], ctx: Context) -> str | None:
    """flashinfer_trtllm and flashinfer_cutedsl FP4 GEMM exist for SM100 only."""
    gemm = f.get("fp4-gemm-backend")
    if gemm in SM100_ONLY_FP4_GEMM and ctx.quantization(f) in NVFP4_QUANTIZATIONS:
        return f"--fp4-gemm-backend {gemm} has SM100-only kernels; fails at first forward on {ctx.gpu}"
    return None


@rule(
    "fp4-moe-auto-trtllm-at-load",
    "hardware",
    "sglang PR #26496 (0.5.23 adjusts only with --quantization modelopt_fp4), open PR #39807: "
    "the FP4 MoE method resolves auto to flashinfer_trtllm at load",
    gpus=("sm120",),
)
def _fp4_moe_auto_at_load(f: dict[str, Any], ctx: Context) -> str | None:
    """SM120, NVFP4, MoE runner still auto after SGLang's adjustments: trtllm-gen at load."""
    if ctx.value(f, "moe-runner-backend") == "auto" and ctx.quantization(f) in NVFP4_QUANTIZATIONS:
        return (
            "MoE runner auto resolves to flashinfer_trtllm at load (set --moe-runner-backend "
            "flashinfer_cutlass), which has no SM120 kernels"
        )
    return None


@rule(
    "nvfp4-moe-cutlass-triton",
    "hardware",
    "sglang 0.5.23 srt/layers/quantization/modelopt_quant.py (ModelOptNvFp4FusedMoEMethod)",
)
def _nvfp4_moe_runner(f: dict[str, Any], ctx: Context) -> str | None:
    """NVFP4 MoE cannot run on the cutlass (fails at load) or triton (first forward) runners."""
    moe = f.get("moe-runner-backend")
    if ctx.quantization(f) in NVFP4_QUANTIZATIONS and moe in ("cutlass", "triton"):
        when = "at load" if moe == "cutlass" else "at the first forward"
        return f"NVFP4 MoE has no --moe-runner-backend {moe} path; fails {when}"
    return None


@rule(
    "hopper-nvfp4-marlin-only",
    "hardware",
    "sglang 0.5.13+ srt/layers/quantization/modelopt_quant.py (ModelOptNvFp4FusedMoEMethod: auto "
    "-> Marlin on capability 8.0-9.x) and fp4_utils.py (initialize_fp4_gemm_config: auto -> marlin); "
    "before 0.5.13 the MoE method raises on anything but Blackwell (docs/sglang-rules-evidence.md)",
    gpus=("sm90",),
)
def _hopper_marlin(f: dict[str, Any], ctx: Context) -> str | None:
    """On SM90, NVFP4 runs only through Marlin (auto picks it since 0.5.13); before, not at all."""
    if ctx.quantization(f) not in NVFP4_QUANTIZATIONS:
        return None
    if not ctx.since(NVFP4_SM90_MARLIN_SINCE):
        return (
            f"SGLang {ctx.version} runs NVFP4 on Blackwell only (Marlin fallback since "
            f"{NVFP4_SM90_MARLIN_SINCE}); fails at load on SM90"
        )
    moe, gemm = ctx.value(f, "moe-runner-backend"), ctx.value(f, "fp4-gemm-backend")
    if moe not in ("marlin", "auto"):
        return f"NVFP4 MoE on SM90 needs the marlin runner, not {moe}"
    if gemm not in ("marlin", "auto"):
        return f"NVFP4 dense GEMM on SM90 needs the marlin backend, not {gemm}"
    return None


@rule(
    "fa3-hopper-only",
    "hardware",
    "sglang srt/layers/attention/attention_registry.py: FlashAttention 3 is Hopper-only",
    gpus=("sm120", "sm100"),
)
def _fa3(f: dict[str, Any], ctx: Context) -> str | None:
    """fa3 attention runs on SM90 (Hopper) only."""
    if "fa3" in ctx.attention_backends(f):
        return f"attention backend fa3 is Hopper-only; fails at load on {ctx.gpu}"
    return None


@rule(
    "hybrid-blackwell-attention",
    "hardware",
    "sglang 0.5.23 srt/layers/attention/attention_registry.py (hybrid GDN backends)",
    gpus=("sm120", "sm100"),
)
def _hybrid_attention(f: dict[str, Any], ctx: Context) -> str | None:
    """Hybrid GDN models on Blackwell: attention triton, trtllm_mha, flashinfer (and fa4 on SM100)."""
    if not ctx.model.hybrid:
        return None
    allowed = {"triton", "trtllm_mha", "flashinfer"} | ({"fa4"} if ctx.gpu == "sm100" else set())
    for backend in ctx.attention_backends(f):
        if backend is not None and backend not in allowed:
            return f"hybrid GDN model on {ctx.gpu} cannot use attention backend {backend}"
    return None
