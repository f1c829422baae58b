"""The rules: SGLang's own adjustments, its refusals, and what the GPU fails later."""

from __future__ import annotations

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils import catalog, rules
from ansible_collections.bwtune.sglang.plugins.module_utils.rules import ModelInfo, evaluate

NEW = "0.5.23"
QWEN = ModelInfo(architecture="Qwen3_5MoeForConditionalGeneration", quantization="modelopt_fp4")
FP4 = {"tp-size": 8, "quantization": "modelopt_fp4"}
MTP = {
    "speculative-algorithm": "NEXTN",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 1,
    "speculative-num-draft-tokens": 2,
}


def old_release() -> str:
    """The March-2026 release the catalog supports (the oldest one)."""
    return catalog.supported_versions()[0]


def rule_ids(evaluation: rules.Evaluation) -> list[str]:
    return [reason.rule for reason in evaluation.reasons]


def test_nextn_runs_as_eagle_and_topk1_draws_steps_plus_one_tokens() -> None:
    result = evaluate({**FP4, **MTP, "mamba-radix-cache-strategy": "extra_buffer"}, "sm100", NEW, QWEN)
    assert result.flags["speculative-algorithm"] == "EAGLE"
    assert result.flags["speculative-num-draft-tokens"] == 4
    assert "nextn-is-eagle" in result.adjusted_by


def test_sm120_fp4_auto_moe_runner_becomes_flashinfer_cutlass_only_on_sm120() -> None:
    on_sm120 = evaluate({**FP4, "moe-runner-backend": "auto"}, "sm120", NEW, QWEN)
    on_sm100 = evaluate({**FP4, "moe-runner-backend": "auto"}, "sm100", NEW, QWEN)
    assert on_sm120.flags["moe-runner-backend"] == "flashinfer_cutlass"
    assert "moe-runner-backend" not in on_sm100.flags  # auto is the default: dropped


def test_sm100_only_kernels_are_hardware_refusals_on_sm120_but_fine_on_sm100() -> None:
    flags = {**FP4, "moe-runner-backend": "flashinfer_trtllm", "fp4-gemm-backend": "flashinfer_cutedsl"}
    on_sm120 = evaluate(flags, "sm120", NEW, QWEN)
    assert rule_ids(on_sm120) == ["sm100-only-moe-runner", "sm100-only-fp4-gemm"]
    assert {r.kind for r in on_sm120.reasons} == {"hardware"}
    assert all(r.source for r in on_sm120.reasons)
    assert evaluate(flags, "sm100", NEW, QWEN).reasons == []


def test_auto_moe_without_explicit_quantization_fails_on_sm120_with_an_nvfp4_checkpoint() -> None:
    result = evaluate({"tp-size": 8}, "sm120", NEW, QWEN)
    assert rule_ids(result) == ["sm120-moe-auto-without-quantization"]
    assert evaluate({"tp-size": 8}, "sm120", NEW, ModelInfo(quantization=None)).reasons == []


def test_nvfp4_moe_on_triton_or_cutlass_fails_on_every_gpu() -> None:
    for gpu in rules.GPUS:
        for runner in ("triton", "cutlass"):
            result = evaluate({**FP4, "moe-runner-backend": runner}, gpu, NEW, QWEN)
            assert "nvfp4-moe-cutlass-triton" in rule_ids(result), (gpu, runner)


def test_hopper_runs_nvfp4_only_through_marlin() -> None:
    marlin = {**FP4, "moe-runner-backend": "marlin", "fp4-gemm-backend": "marlin"}
    assert evaluate(marlin, "sm90", NEW, QWEN).reasons == []
    cutlass = {**FP4, "moe-runner-backend": "flashinfer_cutlass", "fp4-gemm-backend": "marlin"}
    assert "hopper-nvfp4-marlin-only" in rule_ids(evaluate(cutlass, "sm90", NEW, QWEN))


def test_every_reason_is_kept_not_just_the_first() -> None:
    flags = {**FP4, "moe-runner-backend": "flashinfer_trtllm", "attention-backend": "fa3"}
    ids = rule_ids(evaluate(flags, "sm120", NEW, QWEN))
    assert {"sm100-only-moe-runner", "fa3-hopper-only", "hybrid-blackwell-attention"} <= set(ids)


def test_hybrid_model_with_mtp_needs_extra_buffer_or_no_radix_cache_but_not_both() -> None:
    old = old_release()
    strategy = catalog.get_table(old).canonical("mamba-scheduler-strategy")
    assert strategy == "mamba-scheduler-strategy"
    plain = evaluate({**FP4, **MTP}, "sm100", old, QWEN)
    assert "hybrid-speculative-no-buffer" in rule_ids(plain)
    both = {**FP4, **MTP, strategy: "extra_buffer", "disable-radix-cache": True}
    assert "extra-buffer-without-radix" in rule_ids(evaluate(both, "sm100", old, QWEN))
    assert evaluate({**FP4, **MTP, strategy: "extra_buffer"}, "sm100", old, QWEN).reasons == []


def test_rules_only_apply_to_their_releases() -> None:
    spec_trtllm = {**FP4, **MTP, "speculative-moe-runner-backend": "flashinfer_trtllm"}
    old = old_release()
    old_flags = {**spec_trtllm, "mamba-scheduler-strategy": "extra_buffer"}
    new_flags = {**spec_trtllm, "mamba-radix-cache-strategy": "extra_buffer"}
    assert "speculative-moe-runner-trtllm" in rule_ids(evaluate(old_flags, "sm100", old, QWEN))
    assert "speculative-moe-runner-trtllm" not in rule_ids(evaluate(new_flags, "sm100", NEW, QWEN))


def test_flags_the_release_lacks_are_argparse_refusals_naming_the_new_name() -> None:
    result = evaluate({**FP4, "mamba-scheduler-strategy": "extra_buffer"}, "sm100", NEW, QWEN)
    assert rule_ids(result) == ["argparse"]
    assert result.reasons[0].kind == "sglang"
    assert "--mamba-radix-cache-strategy" in result.reasons[0].message


def test_values_are_coerced_like_argparse_and_aliases_resolve() -> None:
    result = evaluate(
        {"--tensor-parallel-size": "8", "mem-fraction-static": "0.8"}, "sm100", NEW, ModelInfo()
    )
    assert result.flags == {"tp-size": 8, "mem-fraction-static": 0.8}


def test_unknown_gpu_is_an_error() -> None:
    with pytest.raises(ValueError, match="sm75"):
        evaluate({}, "sm75", NEW)


def test_every_rule_is_described_sourced_and_uniquely_named() -> None:
    ids = [r.id for r in rules.RULES]
    assert len(ids) == len(set(ids))
    for r in rules.RULES:
        assert r.kind in rules.KINDS and r.source and r.summary
        assert set(r.gpus) <= set(rules.GPUS)
        catalog.version_in(NEW, r.versions)  # a malformed range raises


@pytest.mark.parametrize(
    ("version", "spec", "inside"),
    [
        ("0.5.9", "<0.5.23", True),
        ("0.5.23", "<0.5.23", False),
        ("0.5.10.post1", ">=0.5.10,<0.5.11", True),
        ("0.5.10", ">0.5.10", False),
        ("0.5.23", "*", True),
    ],
)
def test_version_ranges(version: str, spec: str, inside: bool) -> None:
    assert catalog.version_in(version, spec) is inside
