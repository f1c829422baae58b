"""Properties of the planner over generated flag sets (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import planner
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import rules
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import get_table

VERSION = "0.5.23"
MODELS = st.sampled_from(
    [
        rules.ModelInfo("Qwen3_5MoeForConditionalGeneration", "modelopt_fp4"),
        rules.ModelInfo("Qwen3_5MoeForConditionalGeneration", None),
        rules.ModelInfo("DeepseekV3ForCausalLM", "modelopt_fp4"),
        rules.ModelInfo(),
    ]
)
# The flags the rules look at, with the values a sweep uses (and a few that break rules).
CHOICES: dict[str, list[Any]] = {
    "moe-runner-backend": [
        "auto",
        "flashinfer_cutlass",
        "flashinfer_trtllm",
        "flashinfer_cutedsl",
        "triton",
        "cutlass",
        "marlin",
    ],
    "speculative-moe-runner-backend": ["auto", "flashinfer_trtllm", "flashinfer_cutlass"],
    "fp4-gemm-backend": [
        "auto",
        "flashinfer_cudnn",
        "flashinfer_cutlass",
        "flashinfer_trtllm",
        "flashinfer_cutedsl",
        "marlin",
    ],
    "attention-backend": ["flashinfer", "triton", "trtllm_mha", "fa3", "fa4", "flex_attention"],
    "decode-attention-backend": ["flashinfer", "trtllm_mha"],
    "speculative-algorithm": ["NEXTN", "EAGLE", "nextn"],
    "speculative-num-steps": [1, 3, 5],
    "speculative-eagle-topk": [1, 4],
    "speculative-num-draft-tokens": [2, 4, 16],
    "mamba-radix-cache-strategy": ["auto", "no_buffer", "extra_buffer"],
    "disable-radix-cache": [True, False],
    "quantization": ["modelopt_fp4", "fp8"],
    "kv-cache-dtype": ["auto", "fp8_e4m3"],
    "tp-size": [1, 4, 8],
    "ep-size": [1, 2, 8],
    "dp-size": [1, 3],
    "enable-dp-attention": [True, False],
}
FLAG_SETS = st.dictionaries(st.sampled_from(sorted(CHOICES)), st.none(), max_size=len(CHOICES)).flatmap(
    lambda keys: st.fixed_dictionaries({k: st.sampled_from(CHOICES[k]) for k in keys})
)
GPUS = st.sampled_from(rules.GPUS)


@settings(max_examples=300, deadline=None)
@given(FLAG_SETS, GPUS, MODELS)
def test_refused_exactly_when_some_rule_says_so(
    flags: dict[str, Any], gpu: str, model: rules.ModelInfo
) -> None:
    result = rules.evaluate(flags, gpu, VERSION, model)
    for reason in result.reasons:
        assert reason.kind in ("sglang", "hardware") and reason.message and reason.source
    if not result.reasons:
        # No check rule fires on the normalized flags either: a valid config breaks no rule.
        again = rules.evaluate(result.flags, gpu, VERSION, model)
        assert again.reasons == []


@settings(max_examples=300, deadline=None)
@given(FLAG_SETS, GPUS, MODELS)
def test_normalization_is_idempotent(flags: dict[str, Any], gpu: str, model: rules.ModelInfo) -> None:
    once = rules.evaluate(flags, gpu, VERSION, model)
    twice = rules.evaluate(once.flags, gpu, VERSION, model)
    assert twice.flags == once.flags


@settings(max_examples=200, deadline=None)
@given(FLAG_SETS, st.randoms(use_true_random=False))
def test_ids_do_not_depend_on_key_order(flags: dict[str, Any], rnd: Any) -> None:
    items = list(flags.items())
    rnd.shuffle(items)
    assert planner.config_id(dict(items)) == planner.config_id(flags)


@settings(max_examples=100, deadline=None)
@given(FLAG_SETS, GPUS)
def test_argv_parses_back_to_the_same_flags(flags: dict[str, Any], gpu: str) -> None:
    table = get_table(VERSION)
    coerced = dict(table.coerce(name, value) for name, value in flags.items())
    argv = planner.launch_argv("/m", coerced, table)
    parsed = table.parse_argv(argv)
    assert parsed.pop("model-path") == "/m"
    expected = {k: v for k, v in coerced.items() if not (table.flags[k].is_switch and v is False)}
    assert {k: v for k, v in parsed.items()} == expected
