# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Rules of kind `sglang`: the flag sets SGLang refuses at argument time (argparse, ServerArgs)."""

from __future__ import annotations

from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rule_model import (
    ATTENTION_FLAGS,
    HYBRID_ARCHITECTURES,
    KV4_E2M1_CHECK_UNTIL,
    KV4_FA4_MHA_DECODE,
    KV4_MHA_ATTENTION,
    MAMBA_EXTRA_BUFFER_SINCE,
    MAMBA_SPEC_NO_BUFFER_REFUSED_SINCE,
    TRTLLM_MHA_ANY_BLACKWELL_SINCE,
    TRTLLM_MHA_DECODE_OUTSIDE_SM100_SINCE,
    Context,
    Rule,
    registry,
)

REFUSED_RULES: list[Rule] = []
rule = registry(REFUSED_RULES)


QWEN35_ARCHITECTURES = frozenset(a for a in HYBRID_ARCHITECTURES if a.startswith("Qwen3_5"))


@rule(
    "qwen35-needs-0.5.9",
    "sglang",
    "sglang 0.5.8.post1 srt/utils/hf_transformers_utils.py:276 (transformers 4.57.1 has no qwen3_5_moe); "
    "0.5.9 adds srt/configs/qwen3_5.py",
    versions="<0.5.9",
)
def _qwen35_needs_059(f: dict[str, Any], ctx: Context) -> str | None:
    """Releases before 0.5.9 do not know the Qwen3.5 architectures (model type qwen3_5_moe)."""
    if ctx.model.architecture in QWEN35_ARCHITECTURES:
        return (
            f"SGLang {ctx.version} does not recognize {ctx.model.architecture} "
            "(model type qwen3_5_moe needs SGLang 0.5.9 or later)"
        )
    return None


@rule(
    "speculative-moe-runner-trtllm",
    "sglang",
    "sglang srt/server_args.py _handle_speculative_decoding (assert removed by PR #24260; "
    "measured: 0.5.11 has it, 0.5.12 not)",
    versions="<0.5.12",
)
def _spec_moe_trtllm(f: dict[str, Any], ctx: Context) -> str | None:
    """Releases before 0.5.12 (May 2026) refuse flashinfer_trtllm as the speculative MoE runner."""
    if f.get("speculative-moe-runner-backend") == "flashinfer_trtllm":
        return (
            "Currently speculative MoE runner backend cannot be flashinfer_trtllm "
            "for risk in some draft models."
        )
    return None


@rule("speculative-steps-unset", "sglang", "sglang srt/server_args.py _handle_speculative_decoding")
def _spec_steps_unset(f: dict[str, Any], ctx: Context) -> str | None:
    """With speculative-num-steps unset, topk and draft tokens must be unset too."""
    if ctx.speculative(f) and f.get("speculative-num-steps") is None:
        given = [n for n in ("speculative-eagle-topk", "speculative-num-draft-tokens") if n in f]
        if given:
            return f"--{given[0]} needs --speculative-num-steps (set all three or none)"
    return None


@rule("flex-attention-speculative", "sglang", "sglang srt/server_args.py _handle_attention_backend")
def _flex_spec(f: dict[str, Any], ctx: Context) -> str | None:
    """flex_attention does not support speculative decoding."""
    if ctx.speculative(f) and "flex_attention" in ctx.attention_backends(f):
        return "flex_attention backend does not support speculative decoding"
    return None


@rule(
    "trtllm-mha-prefill-sm100",
    "sglang",
    "sglang 0.5.9 srt/server_args.py:1894-1900 (_handle_attention_backend_compatibility); "
    "0.5.10 srt/server_args.py:2367-2376, 0.5.18 srt/server_args.py:6014-6019 (prefill only)",
    versions="<" + TRTLLM_MHA_ANY_BLACKWELL_SINCE,
    gpus=("sm120", "sm90"),
)
def _trtllm_mha_prefill_args(f: dict[str, Any], ctx: Context) -> str | None:
    """Before 0.5.19, SGLang refuses trtllm_mha outside SM100: any use to 0.5.9, prefill from 0.5.10."""
    if not ctx.since(TRTLLM_MHA_DECODE_OUTSIDE_SM100_SINCE):
        if "trtllm_mha" in (f.get(name) for name in ATTENTION_FLAGS):
            return (
                "TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). "
                "Please use a different backend."
            )
        return None
    # 0.5.10-0.5.18 check the prefill backend (--prefill-attention-backend, else --attention-backend);
    # trtllm_mha for decode passes on SM90 and SM120.
    if ctx.attention_backends(f)[0] == "trtllm_mha":
        return (
            "TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100). "
            "Please use a different prefill backend."
        )
    return None


@rule(
    "trtllm-mha-fp8-kv-sm120",
    "sglang",
    "sglang 0.5.23 srt/arg_groups/attention_hook.py (measured: refused from 0.5.19)",
    versions=">=0.5.19",
    gpus=("sm120",),
)
def _trtllm_mha_fp8_kv(f: dict[str, Any], ctx: Context) -> str | None:
    """0.5.19 and later refuse trtllm_mha with an FP8 KV cache on SM120."""
    kv = str(f.get("kv-cache-dtype", "auto"))
    if "trtllm_mha" in ctx.attention_backends(f) and kv.startswith("fp8"):
        return "trtllm_mha with an FP8 KV cache is not supported on SM120"
    return None


@rule(
    "trtllm-mha-speculative-topk",
    "sglang",
    "sglang 0.5.9 srt/server_args.py:2439; 0.5.23 srt/arg_groups/speculative_hook.py:1176-1178",
)
def _trtllm_mha_topk(f: dict[str, Any], ctx: Context) -> str | None:
    """trtllm_mha supports only topk 1 for speculative decoding."""
    topk = f.get("speculative-eagle-topk")
    if (
        ctx.speculative(f)
        and isinstance(topk, int)
        and topk > 1
        and "trtllm_mha" in ctx.attention_backends(f)
    ):
        return "trtllm_mha backend only supports topk = 1 for speculative decoding"
    return None


@rule(
    "kv4-mha-attention-backend",
    "sglang",
    "sglang 0.5.9 srt/server_args.py:1976-2052 (_handle_kv4_compatibility), 0.5.15.post1 "
    "srt/server_args.py:4493-4560; from 0.5.16 the check is for nvfp4/fp4_mx_block16, not fp4_e2m1",
    versions="<" + KV4_E2M1_CHECK_UNTIL,
)
def _kv4_mha_attention(f: dict[str, Any], ctx: Context) -> str | None:
    """An fp4_e2m1 KV cache (MHA models) needs triton/torch_native/flex_attention/trtllm_mha attention."""
    if f.get("kv-cache-dtype") != "fp4_e2m1" or not ctx.model.hybrid:
        return None  # hybrid Qwen models are MHA; MLA models have another list (not modelled)
    prefill_flag, decode_flag = f.get("prefill-attention-backend"), f.get("decode-attention-backend")
    main = f.get("attention-backend")
    if prefill_flag is not None and prefill_flag == decode_flag:
        main = prefill_flag  # SGLang overrides the main backend with the common one
    if main is None:  # SGLang's default (_get_default_attn_backend), Qwen3.5 has no attention sinks
        if ctx.gpu == "sm100":
            return None  # trtllm_mha, or triton for hybrid models: both allowed
        topk_one = f.get("speculative-eagle-topk") in (None, 1)
        main = "fa3" if ctx.gpu == "sm90" and topk_one else "flashinfer"
    prefill, decode = prefill_flag or main, decode_flag or main
    if prefill != decode and prefill != "fa4":
        return None  # SGLang only warns
    if prefill == "fa4":
        if decode not in KV4_FA4_MHA_DECODE:
            return f"KV4 FA4 MHA expects decode attention backend {list(KV4_FA4_MHA_DECODE)}, got {decode}"
        return None
    if main not in KV4_MHA_ATTENTION:
        return f"KV4 MHA expects attention_backend to be one of {list(KV4_MHA_ATTENTION)}, but got {main}"
    return None


@rule("flashinfer-cutlass-moe-quantization", "sglang", "sglang srt/server_args.py _handle_moe_kernel_config")
def _fi_cutlass_moe(f: dict[str, Any], ctx: Context) -> str | None:
    """flashinfer_cutlass MoE: quantization modelopt_fp4/fp8/mixed or none, ep_size 1 or tp_size."""
    if f.get("moe-runner-backend") != "flashinfer_cutlass":
        return None
    quant = f.get("quantization")
    if quant not in (None, "modelopt_fp4", "modelopt_fp8", "modelopt_mixed"):
        return f"flashinfer_cutlass MoE does not support --quantization {quant}"
    ep, tp = ctx.value(f, "ep-size"), ctx.value(f, "tp-size")
    if ep not in (1, tp):
        return f"flashinfer_cutlass MoE needs ep_size 1 or tp_size ({tp}), not {ep}"
    return None


@rule(
    "flashinfer-cutedsl-moe-quantization",
    "sglang",
    "sglang 0.5.11 srt/server_args.py:2974-2977; 0.5.23 srt/arg_groups/moe_hook.py:94-100 "
    "(0.5.10 and 0.5.10.post1 lack the check: measured, they accept it)",
    versions="!=0.5.10,!=0.5.10.post1",
)
def _fi_cutedsl_moe(f: dict[str, Any], ctx: Context) -> str | None:
    """flashinfer_cutedsl MoE needs --quantization modelopt_fp4."""
    if f.get("moe-runner-backend") == "flashinfer_cutedsl" and f.get("quantization") != "modelopt_fp4":
        return "flashinfer_cutedsl MoE needs --quantization modelopt_fp4"
    return None


@rule(
    "flashinfer-trtllm-routed-moe-quantization",
    "sglang",
    "sglang 0.5.10 srt/server_args.py:2694-2699; 0.5.10.post1 srt/server_args.py:2694-2699",
    versions=">=0.5.10,<0.5.11",
)
def _fi_trtllm_routed_moe(f: dict[str, Any], ctx: Context) -> str | None:
    """0.5.10's flashinfer_trtllm_routed MoE takes only fp8, mxfp8 or no quantization."""
    quant = f.get("quantization")
    if f.get("moe-runner-backend") == "flashinfer_trtllm_routed" and quant not in (None, "fp8", "mxfp8"):
        return f"flashinfer_trtllm_routed MoE does not support --quantization {quant}"
    return None


@rule(
    "mamba-extra-buffer-radix-off",
    "sglang",
    "sglang 0.5.10 srt/server_args.py:2165-2171, 0.5.13.post1 srt/server_args.py:2696-2702 "
    "(_handle_mamba_radix_cache); not in 0.5.9 or from 0.5.14",
    versions=">=0.5.10,<" + MAMBA_EXTRA_BUFFER_SINCE,
)
def _mamba_extra_buffer_radix_off(f: dict[str, Any], ctx: Context) -> str | None:
    """0.5.10-0.5.13.post1 refuse mamba extra_buffer with --disable-radix-cache (hybrid models)."""
    name = ctx.mamba_flag()
    if ctx.model.hybrid and name and f.get("disable-radix-cache") and ctx.value(f, name) == "extra_buffer":
        return "mamba extra_buffer is not compatible with --disable-radix-cache (use no_buffer instead)"
    return None


@rule(
    "mamba-no-buffer-speculative-radix",
    "sglang",
    "sglang 0.5.10 srt/server_args.py:2204-2209, 0.5.13.post1 srt/server_args.py:2754-2757 "
    "(_handle_mamba_radix_cache); 0.5.9 and 0.5.14-0.5.18 turn the radix cache off instead",
    versions=">=" + MAMBA_SPEC_NO_BUFFER_REFUSED_SINCE + ",<" + MAMBA_EXTRA_BUFFER_SINCE,
)
def _mamba_no_buffer_speculative_radix(f: dict[str, Any], ctx: Context) -> str | None:
    """0.5.10-0.5.13.post1 refuse speculative decoding with mamba no_buffer and the radix cache on."""
    name = ctx.mamba_flag()
    if not ctx.model.hybrid or name is None or f.get("disable-radix-cache") or not ctx.speculative(f):
        return None
    if ctx.value(f, name) == "no_buffer":
        return "speculative decoding with mamba no_buffer is not compatible with the radix cache"
    return None


@rule("dp-attention-divides-tp", "sglang", "sglang srt/server_args.py _handle_data_parallelism")
def _dp_attention(f: dict[str, Any], ctx: Context) -> str | None:
    """DP attention needs tp_size divisible by dp_size."""
    tp, dp = ctx.value(f, "tp-size"), ctx.value(f, "dp-size")
    if f.get("enable-dp-attention") and isinstance(tp, int) and isinstance(dp, int) and dp and tp % dp:
        return f"--enable-dp-attention needs tp_size ({tp}) divisible by dp_size ({dp})"
    return None


@rule(
    "nnodes-divides-tp-pp",
    "sglang",
    "sglang 0.5.7 srt/server_args.py:4535-4538, 0.5.9 srt/server_args.py:5131-5134, "
    "0.5.16 srt/server_args.py:7576-7579, 0.5.23 srt/arg_groups/validation_hook.py:177-181 "
    "(check_server_args; from 0.5.16 not with --elastic-ep-join-mode scale)",
)
def _nodes_divide_tp_pp(f: dict[str, Any], ctx: Context) -> str | None:
    """SGLang asserts tp_size * pp_size divisible by nnodes (elastic EP scale-join aside)."""
    tp, pp, nodes = ctx.value(f, "tp-size"), ctx.value(f, "pp-size"), ctx.value(f, "nnodes")
    if f.get("elastic-ep-join-mode") == "scale":
        return None
    if all(isinstance(x, int) for x in (tp, pp, nodes)) and nodes and (tp * pp) % nodes:
        return f"tp_size ({tp}) * pp_size ({pp}) must be divisible by the number of nodes ({nodes})"
    return None
