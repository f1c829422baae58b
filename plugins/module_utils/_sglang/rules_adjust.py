# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Rules of kind `adjust`: the changes SGLang makes to a flag set itself, in SGLang's order."""

from __future__ import annotations

from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rule_model import (
    MAMBA_EXTRA_BUFFER_SINCE,
    MAMBA_NO_BUFFER_RADIX_KEPT_SINCE,
    MAMBA_SPEC_NO_BUFFER_REFUSED_SINCE,
    NVFP4_QUANTIZATIONS,
    SM120_FP4_MOE_AUTO_SINCE,
    SPEC_EAGLE_LIKE,
    Context,
    Rule,
    registry,
)

ADJUST_RULES: list[Rule] = []
rule = registry(ADJUST_RULES)


@rule("nextn-is-eagle", "adjust", "sglang srt/server_args.py _handle_speculative_decoding")
def _nextn_is_eagle(f: dict[str, Any], ctx: Context) -> str | None:
    """NEXTN is an alias: SGLang runs it as EAGLE."""
    if f.get("speculative-algorithm") == "NEXTN":
        f["speculative-algorithm"] = "EAGLE"
        return "changed"
    return None


@rule("eagle-topk1-draft-tokens", "adjust", "sglang srt/server_args.py _handle_speculative_decoding")
def _eagle_draft_tokens(f: dict[str, Any], ctx: Context) -> str | None:
    """EAGLE with topk 1 draws a chain: draft tokens = steps + 1."""
    steps = f.get("speculative-num-steps")
    chain = f.get("speculative-algorithm") in SPEC_EAGLE_LIKE and f.get("speculative-eagle-topk") == 1
    if chain and steps and f.get("speculative-num-draft-tokens") != steps + 1:
        f["speculative-num-draft-tokens"] = steps + 1
        return "changed"
    return None


@rule(
    "sm100-hybrid-moe-auto",
    "adjust",
    "sglang 0.5.9 srt/server_args.py:1579-1599; 0.5.23 srt/arg_groups/model_overrides/qwen3_moe.py:77-86",
    gpus=("sm100",),
)
def _sm100_hybrid_moe_auto(f: dict[str, Any], ctx: Context) -> str | None:
    """On SM100, hybrid Qwen models take the checkpoint's quantization; MoE auto -> flashinfer_trtllm."""
    if not ctx.model.hybrid:
        return None
    changed = None
    if "quantization" not in f and ctx.model.quantization in NVFP4_QUANTIZATIONS:
        # 0.5.9 reads config.json's quant_method (`modelopt`), 0.5.23 the resolved `modelopt_fp4`.
        f["quantization"] = "modelopt_fp4" if ctx.since_0_5_23 else "modelopt"
        changed = "changed"
    trtllm_quantizations = (None, "fp8", "modelopt_fp4") + (("modelopt_mixed",) if ctx.since_0_5_23 else ())
    if (
        f.get("quantization") in trtllm_quantizations
        and ctx.value(f, "moe-a2a-backend") == "none"
        and ctx.value(f, "moe-runner-backend") == "auto"
    ):
        f["moe-runner-backend"] = "flashinfer_trtllm"
        changed = "changed"
    return changed


@rule(
    "sm120-fp4-moe-auto",
    "adjust",
    "sglang 0.5.23 srt/arg_groups/overrides.py:1513-1522 (PR #26496); 0.5.9 has no such adjustment",
    versions=">=" + SM120_FP4_MOE_AUTO_SINCE,
    gpus=("sm120",),
)
def _sm120_fp4_moe_auto(f: dict[str, Any], ctx: Context) -> str | None:
    """On SM120 with --quantization modelopt_fp4, MoE runner auto becomes flashinfer_cutlass (0.5.23)."""
    if f.get("quantization") == "modelopt_fp4" and ctx.value(f, "moe-runner-backend") == "auto":
        f["moe-runner-backend"] = "flashinfer_cutlass"
        return "changed"
    return None


@rule(
    "mamba-strategy-auto",
    "adjust",
    "sglang 0.5.9 srt/server_args.py:874-877; 0.5.23 srt/arg_groups/overrides.py:453-487",
)
def _mamba_strategy_auto(f: dict[str, Any], ctx: Context) -> str | None:
    """Mamba strategy auto: no_buffer in 0.5.9; extra_buffer in 0.5.23 (hybrid, radix cache, overlap)."""
    name = ctx.mamba_flag()
    if name is None or ctx.value(f, name) != "auto":
        return None
    if not ctx.since(MAMBA_EXTRA_BUFFER_SINCE):
        f[name] = "no_buffer"  # every model, before any model check
        return "changed"
    if not ctx.model.hybrid or f.get("disable-radix-cache") or f.get("disable-overlap-schedule"):
        return None  # 0.5.23 leaves it auto; page size or overlap off are not modelled
    if ctx.value(f, "linear-attn-backend") != "triton":
        return None
    f[name] = "extra_buffer"
    return "changed"


@rule(
    "mamba-no-buffer-radix-off",
    "adjust",
    "sglang 0.5.9 srt/server_args.py:1750-1763 (_handle_mamba_radix_cache)",
    versions="<" + MAMBA_NO_BUFFER_RADIX_KEPT_SINCE,
)
def _mamba_no_buffer_radix_off(f: dict[str, Any], ctx: Context) -> str | None:
    """0.5.9, hybrid models on no_buffer: speculative decoding (or trtllm_mha) turns the radix cache off."""
    name = ctx.mamba_flag()
    if (
        not ctx.model.hybrid
        or name is None
        or f.get("disable-radix-cache")
        or ctx.value(f, name) != "no_buffer"
    ):
        return None
    refused = ctx.since(MAMBA_SPEC_NO_BUFFER_REFUSED_SINCE) and not ctx.since(MAMBA_EXTRA_BUFFER_SINCE)
    if ctx.speculative(f) and refused:
        return None  # mamba-no-buffer-speculative-radix refuses it instead
    if ctx.speculative(f) or f.get("attention-backend") == "trtllm_mha":
        f["disable-radix-cache"] = True
        return "changed"
    return None


@rule(
    "speculative-moe-runner-follows-main",
    "adjust",
    "sglang 0.5.9 srt/server_args.py:2341-2346; 0.5.23 srt/arg_groups/overrides.py:1631-1656",
)
def _spec_moe_follows_main(f: dict[str, Any], ctx: Context) -> str | None:
    """Unset, the draft MoE runner copies the main one (before 0.5.12: auto instead of flashinfer_trtllm)."""
    # SGLang fills it in for every launch; it only means something with a draft model.
    if f.get("speculative-moe-runner-backend") is not None or not ctx.speculative(f):
        return None
    main = ctx.value(f, "moe-runner-backend")
    if ctx.since("0.5.12"):  # measured: 0.5.11 still maps flashinfer_trtllm to auto, 0.5.12 copies it
        draft = "flashinfer_trtllm" if main == "flashinfer_megamoe" else main
        draft = "auto" if str(draft).startswith("lora_") else draft
    else:
        draft = "auto" if main == "flashinfer_trtllm" else main
    f["speculative-moe-runner-backend"] = draft
    return "changed"
