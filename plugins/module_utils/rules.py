# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What SGLang does with a set of launch flags on a given GPU, before anything is launched.

Three kinds of rule, applied in one ordered pass (SGLang's own order where it matters):
- `adjust`: a change SGLang makes itself (NEXTN -> EAGLE, draft tokens = steps + 1, ...);
  these give the normalized flags two configs are compared by.
- `sglang`: SGLang refuses the flags at argument time (argparse or ServerArgs checks).
- `hardware`: SGLang accepts the flags, but the GPU fails them at model load or first
  forward (kernels that exist for SM100 only, NVFP4 MoE paths that cannot run, ...).

Each rule names the SGLang releases it applies to (a version range) and its source.
`evaluate()` returns every reason a flag set is refused, not just the first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils.catalog import (
    CatalogError,
    FlagTable,
    get_table,
    version_in,
)

GPUS = ("sm120", "sm100", "sm90")
KINDS = ("adjust", "sglang", "hardware")

# Architectures with linear-attention (GDN / mamba-style) layers: SGLang's hybrid cache rules.
HYBRID_ARCHITECTURES = frozenset(
    {
        "Qwen3NextForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
    }
)
NVFP4_QUANTIZATIONS = frozenset({"modelopt_fp4"})
SPEC_EAGLE_LIKE = frozenset({"EAGLE", "EAGLE3"})
SM100_ONLY_MOE = ("flashinfer_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutedsl")
SM100_ONLY_FP4_GEMM = ("flashinfer_trtllm", "flashinfer_cutedsl")
ATTENTION_FLAGS = ("attention-backend", "prefill-attention-backend", "decode-attention-backend")
KV4_MHA_ATTENTION = ("triton", "torch_native", "flex_attention", "trtllm_mha")  # fp4 KV, MHA model
KV4_FA4_MHA_DECODE = ("triton", "torch_native", "flex_attention")  # fp4 KV, fa4 prefill, MHA model
MAMBA_STRATEGY_FLAGS = ("mamba-radix-cache-strategy", "mamba-scheduler-strategy")

# First release with a behaviour, measured against every release (differential suite,
# docs/sglang-rules-evidence.md "Every release"): rules whose verdict moved name these.
MAMBA_SPEC_NO_BUFFER_REFUSED_SINCE = "0.5.10"  # to 0.5.13.post1: no_buffer + speculative + radix refused
MAMBA_EXTRA_BUFFER_SINCE = "0.5.14"  # auto -> extra_buffer (the flag's new name came with it)
MAMBA_NO_BUFFER_RADIX_KEPT_SINCE = "0.5.19"  # no_buffer + speculative keeps the radix cache
TRTLLM_MHA_DECODE_OUTSIDE_SM100_SINCE = "0.5.10"  # trtllm_mha for decode only accepted on SM90/SM120
TRTLLM_MHA_ANY_BLACKWELL_SINCE = "0.5.19"  # trtllm_mha prefill accepted outside SM100
KV4_E2M1_CHECK_UNTIL = "0.5.16"  # fp4_e2m1 KV cache checked against the attention backend before
SM120_FP4_MOE_AUTO_SINCE = "0.5.13"  # SM120 + modelopt_fp4: MoE auto -> flashinfer_cutlass


@dataclass(frozen=True)
class Reason:
    """Why a flag set is refused: which rule, by whom (`sglang` or `hardware`), and the source."""

    rule: str
    kind: str
    message: str
    source: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "kind": self.kind, "message": self.message, "source": self.source}


@dataclass(frozen=True)
class ModelInfo:
    """What the rules need to know about the checkpoint (from its config.json, or the matrix)."""

    architecture: str | None = None
    quantization: str | None = None  # the checkpoint's own, e.g. modelopt_fp4

    @property
    def hybrid(self) -> bool:
        return self.architecture in HYBRID_ARCHITECTURES


@dataclass
class Context:
    gpu: str
    version: str
    table: FlagTable
    model: ModelInfo

    def value(self, flags: dict[str, Any], name: str) -> Any:
        """The flag's value: set, or this release's default."""
        return flags[name] if name in flags else self.table.default(name)

    def quantization(self, flags: dict[str, Any]) -> str | None:
        """The quantization the weights run with: the flag, else the checkpoint's own
        (`modelopt`, which 0.5.9 copies from config.json, means the checkpoint's)."""
        given = flags.get("quantization")
        return self.model.quantization if given in (None, "modelopt") else given

    def since(self, release: str) -> bool:
        """Whether this SGLang is `release` or later (a source build by its position)."""
        return _since(self.version, release)

    @property
    def since_0_5_23(self) -> bool:
        """Whether the release has 0.5.23's resolution pipeline (arg_groups/)."""
        return _since_0_5_23(self.version)

    def mamba_flag(self) -> str | None:
        """What this release calls the mamba cache strategy flag."""
        return _mamba_flag_of(self.table)

    def speculative(self, flags: dict[str, Any]) -> str | None:
        return flags.get("speculative-algorithm")

    def attention_backends(self, flags: dict[str, Any]) -> tuple[Any, Any]:
        """(prefill, decode) attention backends as SGLang derives them from the three flags."""
        main = flags.get("attention-backend")
        return flags.get("prefill-attention-backend") or main, flags.get("decode-attention-backend") or main


@functools.lru_cache(maxsize=None)
def _since(version: str, release: str) -> bool:
    return version_in(version, ">=" + release)


@functools.lru_cache(maxsize=None)
def _since_0_5_23(version: str) -> bool:
    return version_in(version, ">=0.5.23")


_MAMBA_FLAG: dict[str, str | None] = {}


def _mamba_flag_of(table: FlagTable) -> str | None:
    if table.key not in _MAMBA_FLAG:
        _MAMBA_FLAG[table.key] = next((n for n in MAMBA_STRATEGY_FLAGS if n in table.flags), None)
    return _MAMBA_FLAG[table.key]


# A check returns a message when the rule refuses the flags, else None; an adjust edits the
# flags in place and returns a truthy value when it changed them.
Check = Callable[[dict[str, Any], Context], "str | None"]


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str
    summary: str
    source: str
    versions: str = "*"
    gpus: tuple[str, ...] = GPUS
    fn: Check = field(default=lambda flags, ctx: None, repr=False, compare=False)

    def applies(self, version: str, gpu: str) -> bool:
        return gpu in self.gpus and version_in(version, self.versions)


RULES: list[Rule] = []


def rule(
    id: str, kind: str, source: str, versions: str = "*", gpus: tuple[str, ...] = GPUS
) -> Callable[[Check], Check]:
    """Register a rule; the function's docstring is its one-line summary."""
    if kind not in KINDS:
        raise ValueError("rule kind must be one of %s, got %r" % (KINDS, kind))

    def register(fn: Check) -> Check:
        summary = (fn.__doc__ or id).strip().splitlines()[0]
        RULES.append(Rule(id, kind, summary, source, versions, gpus, fn))
        return fn

    return register


# ---------------------------------------------------------------- adjustments SGLang makes itself


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


# ---------------------------------------------------------------- refused at argument time


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


# ---------------------------------------------------------------- the GPU fails them later


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
    "sglang 0.5.23 srt/layers/quantization/modelopt_quant.py:2377-2387 and fp4_utils.py:149-160 "
    "(auto picks Marlin on SM80-SM90); 0.5.9 modelopt_quant.py:1334 (Blackwell only)",
    gpus=("sm90",),
)
def _hopper_marlin(f: dict[str, Any], ctx: Context) -> str | None:
    """On SM90, NVFP4 runs only through Marlin (auto picks it in 0.5.23); 0.5.9 has no NVFP4 there."""
    if ctx.quantization(f) not in NVFP4_QUANTIZATIONS:
        return None
    if not ctx.since_0_5_23:
        return "SGLang 0.5.9 runs NVFP4 on Blackwell only; fails at load on SM90"
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


# ---------------------------------------------------------------- evaluation


@dataclass
class Evaluation:
    """The flags as SGLang would hold them, and every reason they would be refused."""

    flags: dict[str, Any]
    reasons: list[Reason]
    adjusted_by: list[str] = field(default_factory=list)

    @property
    def rejected(self) -> bool:
        return bool(self.reasons)


_APPLICABLE: dict[tuple[str, str], list[Rule]] = {}


def rules_for(version: str, gpu: str) -> list[Rule]:
    """The rules that apply to one SGLang release on one GPU, in evaluation order."""
    key = (version, gpu)
    if key not in _APPLICABLE:
        _APPLICABLE[key] = [r for r in RULES if r.applies(version, gpu)]
    return _APPLICABLE[key]


def check_gpu(gpu: str) -> None:
    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r} (known: {', '.join(GPUS)})")


def evaluate(
    flags: dict[str, Any],
    gpu: str,
    version: str,
    model: ModelInfo | None = None,
    *,
    coerced: bool = False,
    table: FlagTable | None = None,
) -> Evaluation:
    """Normalize `flags` the way SGLang `version` would on `gpu`, and collect every refusal.

    `flags` maps flag names (CLI spelling or alias, dashes optional) to values as written;
    values are coerced as argparse would. A flag or value the release lacks is an `sglang`
    reason (argparse exits on it). Flags equal to the release's default are dropped from
    the result, so two spellings of the same launch normalize to the same flags.
    `coerced=True` says names are canonical and values already coerced (the planner's
    matrix is), which skips that step. `table` is the flag table to check against when it is
    not the catalog's for `version` (a node's own installed SGLang parser); the rules still
    apply by `version`.
    """
    check_gpu(gpu)
    table = table or get_table(version)
    ctx = Context(gpu, version, table, model or ModelInfo())
    reasons: list[Reason] = []
    current: dict[str, Any] = dict(flags) if coerced else {}
    for name, value in () if coerced else flags.items():
        try:
            canonical, value = table.coerce(name, value)
        except CatalogError as err:
            reasons.append(Reason("argparse", "sglang", str(err), f"sglang {version} argparse"))
            continue
        current[canonical] = value
    adjusted_by: list[str] = []
    for r in rules_for(version, gpu):
        if r.kind == "adjust":
            if r.fn(current, ctx):
                adjusted_by.append(r.id)
            continue
        message = r.fn(current, ctx)
        if message:
            reasons.append(Reason(r.id, r.kind, message, r.source))
    defaults = _defaults_of(table)
    normalized = {n: v for n, v in current.items() if n not in defaults or v != defaults[n]}
    return Evaluation(normalized, reasons, adjusted_by)


_DEFAULTS: dict[str, dict[str, Any]] = {}


def _defaults_of(table: FlagTable) -> dict[str, Any]:
    if table.key not in _DEFAULTS:
        _DEFAULTS[table.key] = {name: spec.default for name, spec in table.flags.items()}
    return _DEFAULTS[table.key]
