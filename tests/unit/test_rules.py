"""The rules: SGLang's own adjustments, its refusals, and what the GPU fails later."""

from __future__ import annotations

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import catalog, rules
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rules import ModelInfo, evaluate

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
    """The March-2026 release (the oldest one that runs Qwen3.5)."""
    return "0.5.9"


def rule_ids(evaluation: rules.Evaluation) -> list[str]:
    return [reason.rule for reason in evaluation.reasons]


def test_nextn_runs_as_eagle_and_topk1_draws_steps_plus_one_tokens() -> None:
    result = evaluate({**FP4, **MTP, "mamba-radix-cache-strategy": "extra_buffer"}, "sm100", NEW, QWEN)
    assert result.flags["speculative-algorithm"] == "EAGLE"
    assert result.flags["speculative-num-draft-tokens"] == 4
    assert "nextn-is-eagle" in result.adjusted_by


def test_fp4_auto_moe_runner_per_gpu_and_release() -> None:
    def moe(gpu: str, version: str, flags: dict[str, object] = FP4) -> object:
        result = evaluate({**flags, "moe-runner-backend": "auto"}, gpu, version, QWEN)
        return result.flags.get("moe-runner-backend")

    assert moe("sm120", NEW) == "flashinfer_cutlass"
    assert moe("sm120", "0.5.9") is None  # no SM120 adjustment in 0.5.9: stays auto (the default)
    assert moe("sm100", NEW) == moe("sm100", "0.5.9") == "flashinfer_trtllm"
    assert moe("sm90", NEW) is None


def test_sm100_takes_the_checkpoints_quantization_as_each_release_names_it() -> None:
    new = evaluate({"tp-size": 8}, "sm100", NEW, QWEN).flags
    old = evaluate({"tp-size": 8}, "sm100", "0.5.9", QWEN).flags
    assert (new["quantization"], new["moe-runner-backend"]) == ("modelopt_fp4", "flashinfer_trtllm")
    assert old["quantization"] == "modelopt" and "moe-runner-backend" not in old  # modelopt: no trtllm


def test_the_draft_moe_runner_follows_the_main_one() -> None:
    spec = {**FP4, **MTP, "moe-runner-backend": "flashinfer_trtllm"}
    assert evaluate(spec, "sm100", NEW, QWEN).flags["speculative-moe-runner-backend"] == "flashinfer_trtllm"
    assert evaluate(spec, "sm100", "0.5.9", QWEN).flags["speculative-moe-runner-backend"] == "auto"
    cutlass = {**spec, "moe-runner-backend": "flashinfer_cutlass"}
    draft = evaluate(cutlass, "sm100", "0.5.9", QWEN).flags["speculative-moe-runner-backend"]
    assert draft == "flashinfer_cutlass"


def test_sm100_only_kernels_are_hardware_refusals_on_sm120_but_fine_on_sm100() -> None:
    flags = {**FP4, "moe-runner-backend": "flashinfer_trtllm", "fp4-gemm-backend": "flashinfer_cutedsl"}
    on_sm120 = evaluate(flags, "sm120", NEW, QWEN)
    assert rule_ids(on_sm120) == ["sm100-only-moe-runner", "sm100-only-fp4-gemm"]
    assert {r.kind for r in on_sm120.reasons} == {"hardware"}
    assert all(r.source for r in on_sm120.reasons)
    assert evaluate(flags, "sm100", NEW, QWEN).reasons == []


def test_fp4_moe_auto_left_for_load_time_fails_on_sm120() -> None:
    result = evaluate({"tp-size": 8}, "sm120", NEW, QWEN)
    assert rule_ids(result) == ["fp4-moe-auto-trtllm-at-load"]
    assert evaluate({"tp-size": 8}, "sm120", NEW, ModelInfo(quantization=None)).reasons == []
    assert evaluate(FP4, "sm120", NEW, QWEN).reasons == []  # 0.5.23 picks flashinfer_cutlass itself
    assert rule_ids(evaluate(FP4, "sm120", "0.5.9", QWEN)) == ["fp4-moe-auto-trtllm-at-load"]


def test_nvfp4_moe_on_triton_or_cutlass_fails_on_every_gpu() -> None:
    for gpu in rules.GPUS:
        for runner in ("triton", "cutlass"):
            result = evaluate({**FP4, "moe-runner-backend": runner}, gpu, NEW, QWEN)
            assert "nvfp4-moe-cutlass-triton" in rule_ids(result), (gpu, runner)


def test_hopper_runs_nvfp4_only_through_marlin() -> None:
    marlin = {**FP4, "moe-runner-backend": "marlin", "fp4-gemm-backend": "marlin"}
    assert evaluate(marlin, "sm90", NEW, QWEN).reasons == []
    assert evaluate(FP4, "sm90", NEW, QWEN).reasons == []  # auto picks Marlin below SM100
    assert rule_ids(evaluate(FP4, "sm90", "0.5.9", QWEN)) == ["hopper-nvfp4-marlin-only"]  # Blackwell only
    cutlass = {**FP4, "moe-runner-backend": "flashinfer_cutlass", "fp4-gemm-backend": "marlin"}
    assert "hopper-nvfp4-marlin-only" in rule_ids(evaluate(cutlass, "sm90", NEW, QWEN))


def test_hopper_nvfp4_marlin_fallback_has_its_release_boundary() -> None:
    # 0.5.13 is the first release whose NVFP4 MoE method and FP4 GEMM fall back to Marlin on
    # SM80-SM90 (docs/sglang-rules-evidence.md, "Hardware rules, release by release").
    for version in ("0.5.13", "0.5.16", "0.5.22"):
        assert evaluate(FP4, "sm90", version, QWEN).reasons == [], version
    result = evaluate(FP4, "sm90", "0.5.12.post1", QWEN)
    assert rule_ids(result) == ["hopper-nvfp4-marlin-only"]
    assert "SGLang 0.5.12.post1 runs NVFP4 on Blackwell only" in result.reasons[0].message


def test_every_reason_is_kept_not_just_the_first() -> None:
    flags = {**FP4, "moe-runner-backend": "flashinfer_trtllm", "attention-backend": "fa3"}
    ids = rule_ids(evaluate(flags, "sm120", NEW, QWEN))
    assert {"sm100-only-moe-runner", "fa3-hopper-only", "hybrid-blackwell-attention"} <= set(ids)


def test_hybrid_model_with_mtp_resolves_the_mamba_cache_itself_in_both_releases() -> None:
    old = old_release()
    strategy = catalog.get_table(old).canonical("mamba-scheduler-strategy")
    assert strategy == "mamba-scheduler-strategy"
    plain = evaluate({**FP4, **MTP}, "sm100", old, QWEN)
    assert plain.reasons == []  # no ValueError: 0.5.9 takes no_buffer and turns the radix cache off
    assert (plain.flags[strategy], plain.flags["disable-radix-cache"]) == ("no_buffer", True)
    new = evaluate({**FP4, **MTP}, "sm100", NEW, QWEN)
    assert new.reasons == [] and new.flags["mamba-radix-cache-strategy"] == "extra_buffer"
    assert "disable-radix-cache" not in new.flags
    for version, name in ((old, strategy), (NEW, "mamba-radix-cache-strategy")):
        both = {**FP4, **MTP, name: "extra_buffer", "disable-radix-cache": True}
        assert evaluate(both, "sm100", version, QWEN).reasons == []  # accepted by both


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


def test_qwen35_is_refused_by_releases_before_0_5_9() -> None:
    qwen35 = rules.ModelInfo("Qwen3_5MoeForConditionalGeneration", "modelopt_fp4")
    flags = {"tp-size": 8, "moe-runner-backend": "flashinfer_cutlass"}
    for version in ("0.5.7", "0.5.8", "0.5.8.post1"):
        assert rule_ids(rules.evaluate(flags, "sm120", version, qwen35)) == ["qwen35-needs-0.5.9"]
    assert rule_ids(rules.evaluate(flags, "sm120", "0.5.9", qwen35)) == []
    other = rules.ModelInfo("Qwen3NextForCausalLM", None)
    assert rule_ids(rules.evaluate(flags, "sm120", "0.5.8", other)) == []


@pytest.mark.parametrize("gpu", ["sm120", "sm90"])
def test_trtllm_mha_outside_sm100_is_refused_for_prefill_and_only_prefill_from_0_5_10(gpu: str) -> None:
    decode_only = {**FP4, "prefill-attention-backend": "triton", "decode-attention-backend": "trtllm_mha"}
    prefill = {**FP4, "prefill-attention-backend": "trtllm_mha", "decode-attention-backend": "triton"}
    both = {**FP4, "attention-backend": "trtllm_mha"}
    main_prefill_overridden = {**both, "prefill-attention-backend": "triton"}
    refused = "trtllm-mha-prefill-sm100"
    for flags in (decode_only, prefill, both, main_prefill_overridden):  # 0.5.9: any use refused
        assert refused in rule_ids(evaluate(flags, gpu, "0.5.9", QWEN))
    for version in ("0.5.10", "0.5.14", "0.5.18"):  # prefill only
        assert refused not in rule_ids(evaluate(decode_only, gpu, version, QWEN))
        assert refused not in rule_ids(evaluate(main_prefill_overridden, gpu, version, QWEN))
        assert refused in rule_ids(evaluate(prefill, gpu, version, QWEN))
        assert refused in rule_ids(evaluate(both, gpu, version, QWEN))
    assert refused not in rule_ids(evaluate(both, gpu, "0.5.19", QWEN))
    assert refused not in rule_ids(evaluate(both, "sm100", "0.5.14", QWEN))


def test_tp_times_pp_must_divide_among_the_nodes_on_every_release() -> None:
    rule = "nnodes-divides-tp-pp"
    for version in ("0.5.9", "0.5.16", NEW):
        assert rule in rule_ids(evaluate({**FP4, "nnodes": 3}, "sm120", version, QWEN))
        assert rule not in rule_ids(evaluate({**FP4, "nnodes": 2}, "sm120", version, QWEN))
        assert rule not in rule_ids(evaluate({**FP4, "nnodes": 3, "pp-size": 3}, "sm120", version, QWEN))
        assert rule not in rule_ids(evaluate(FP4, "sm120", version, QWEN))  # one node by default
    scale_join = {**FP4, "nnodes": 3, "elastic-ep-join-mode": "scale"}  # from 0.5.16: not checked
    assert rule not in rule_ids(evaluate(scale_join, "sm120", NEW, QWEN))


def test_fp4_e2m1_kv_cache_needs_an_fp4_capable_attention_backend_before_0_5_16() -> None:
    rule = "kv4-mha-attention-backend"
    kv4 = {**FP4, "kv-cache-dtype": "fp4_e2m1"}

    def refused(flags: dict[str, object], gpu: str, version: str = "0.5.12") -> bool:
        return rule in rule_ids(evaluate(flags, gpu, version, QWEN))

    assert refused(kv4, "sm120") and refused(kv4, "sm90")  # defaults: flashinfer, fa3
    assert not refused(kv4, "sm100")  # default trtllm_mha (or triton for hybrid models)
    assert refused({**kv4, "attention-backend": "flashinfer"}, "sm120", "0.5.9")
    assert not refused({**kv4, "attention-backend": "triton"}, "sm120")
    assert not refused({**kv4, "decode-attention-backend": "triton"}, "sm120")  # differ: a warning
    both_flashinfer = {
        **kv4,
        "prefill-attention-backend": "flashinfer",
        "decode-attention-backend": "flashinfer",
    }
    assert refused({**both_flashinfer, "attention-backend": "triton"}, "sm120")  # the common one wins
    assert refused({**kv4, "attention-backend": "fa4"}, "sm100")  # fa4 prefill needs another decode
    assert not refused(
        {**kv4, "prefill-attention-backend": "fa4", "decode-attention-backend": "triton"}, "sm100"
    )
    assert not refused({**kv4, "kv-cache-dtype": "fp8_e4m3"}, "sm120")
    assert not refused(kv4, "sm120", "0.5.16") and not refused(kv4, "sm90", NEW)
    assert rule not in rule_ids(evaluate(kv4, "sm120", "0.5.12", rules.ModelInfo("LlamaForCausalLM", None)))


def test_extra_buffer_with_the_radix_cache_off_is_refused_by_0_5_10_to_0_5_13() -> None:
    rule = "mamba-extra-buffer-radix-off"
    flags = {**FP4, "mamba-scheduler-strategy": "extra_buffer", "disable-radix-cache": True}
    for version in ("0.5.10", "0.5.13.post1"):
        assert rule in rule_ids(evaluate(flags, "sm120", version, QWEN))
        assert rule not in rule_ids(evaluate({**flags, "disable-radix-cache": False}, "sm120", version, QWEN))
        no_buffer = {**flags, "mamba-scheduler-strategy": "no_buffer"}
        assert rule not in rule_ids(evaluate(no_buffer, "sm120", version, QWEN))
        other = rules.ModelInfo("LlamaForCausalLM", None)
        assert rule not in rule_ids(evaluate(flags, "sm120", version, other))
    assert rule not in rule_ids(evaluate(flags, "sm120", "0.5.9", QWEN))
    assert rule not in rule_ids(evaluate(flags, "sm120", "0.5.14", QWEN))


def test_speculative_no_buffer_with_the_radix_cache_on_is_refused_by_0_5_10_to_0_5_13() -> None:
    rule = "mamba-no-buffer-speculative-radix"
    flags = {**FP4, **MTP, "mamba-scheduler-strategy": "no_buffer"}
    for version in ("0.5.10", "0.5.13.post1"):
        result = evaluate(flags, "sm120", version, QWEN)
        assert rule in rule_ids(result) and "disable-radix-cache" not in result.flags
        assert rule not in rule_ids(evaluate({**flags, "disable-radix-cache": True}, "sm120", version, QWEN))
        extra = {**flags, "mamba-scheduler-strategy": "extra_buffer"}
        assert rule not in rule_ids(evaluate(extra, "sm120", version, QWEN))
        trtllm = {**FP4, "mamba-scheduler-strategy": "no_buffer", "attention-backend": "trtllm_mha"}
        assert (
            evaluate(trtllm, "sm100", version, QWEN).flags["disable-radix-cache"] is True
        )  # still an adjust
    renamed = {**FP4, **MTP, "mamba-radix-cache-strategy": "no_buffer"}  # the flag's 0.5.14 name
    for version, given in (("0.5.9", flags), ("0.5.14", renamed)):  # these turn the radix cache off
        result = evaluate(given, "sm120", version, QWEN)
        assert rule not in rule_ids(result) and result.flags["disable-radix-cache"] is True
