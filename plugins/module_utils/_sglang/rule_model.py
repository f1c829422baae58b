# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The vocabulary of the planner's rules: GPUs, kinds, Reason, ModelInfo, Context, Rule and its registry."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import (
    FlagTable,
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
# Hardware boundaries, read from each release's source (docs/sglang-rules-evidence.md "Hardware
# rules, release by release"; tests/oracle/hardware_evidence.py checks the cited lines).
NVFP4_SM90_MARLIN_SINCE = "0.5.13"  # NVFP4 MoE and FP4 GEMM fall back to Marlin on SM80-SM90


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


def registry(family: list[Rule]) -> Callable[..., Callable[[Check], Check]]:
    """The decorator that registers a rule into `family` (one list per rule family, in
    evaluation order); the function's docstring is its one-line summary."""

    def rule(
        id: str, kind: str, source: str, versions: str = "*", gpus: tuple[str, ...] = GPUS
    ) -> Callable[[Check], Check]:
        if kind not in KINDS:
            raise ValueError("rule kind must be one of %s, got %r" % (KINDS, kind))

        def register(fn: Check) -> Check:
            summary = (fn.__doc__ or id).strip().splitlines()[0]
            family.append(Rule(id, kind, summary, source, versions, gpus, fn))
            return fn

        return register

    return rule
