"""The oracle answers what the real SGLang releases do with launch arguments on each GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.oracle import sglang_oracle

REPO = Path(__file__).resolve().parents[2]

# Building the two oracle venvs on a clean machine takes several minutes (first test only).
pytestmark = [pytest.mark.oracle, pytest.mark.timeout(2400)]

BASE = ["--model-path", str(sglang_oracle.QWEN35_NVFP4), "--tp-size", "8"]
FP4 = ["--quantization", "modelopt_fp4"]
SPEC = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1"]
MAMBA_FLAG = {"0.5.23": "--mamba-radix-cache-strategy", "0.5.9": "--mamba-scheduler-strategy"}

CASES: dict[str, list[str]] = {
    "fp4": FP4,
    "no-quant": [],
    "bogus-moe": [*FP4, "--moe-runner-backend", "bogus"],
    "nextn": [*FP4, *SPEC, "{mamba}", "extra_buffer"],
    "spec-moe-trtllm": [
        *FP4,
        *SPEC,
        "{mamba}",
        "extra_buffer",
        "--speculative-moe-runner-backend",
        "flashinfer_trtllm",
    ],
    "cutlass-moe-ep2": [*FP4, "--moe-runner-backend", "flashinfer_cutlass", "--ep-size", "2"],
    "nnodes-3": [*FP4, "--nnodes", "3"],
    "dp-attention-3": [*FP4, "--dp-size", "3", "--enable-dp-attention"],
    "old-mamba-flag": [*FP4, "--mamba-scheduler-strategy", "extra_buffer"],
}


def _argv(version: str, extra: list[str]) -> list[str]:
    return BASE + [MAMBA_FLAG[version] if a == "{mamba}" else a for a in extra]


@pytest.fixture(scope="module")
def verdicts() -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """{(version, gpu): {case: result}}, one oracle call per release and GPU."""
    out = {}
    for version in sglang_oracle.VERSIONS:
        for gpu in ("sm120", "sm100"):
            results = sglang_oracle.evaluate(version, gpu, [_argv(version, a) for a in CASES.values()])
            out[version, gpu] = dict(zip(CASES, results, strict=True))
    return out


@pytest.mark.parametrize("version", sglang_oracle.VERSIONS)
def test_unknown_choice_is_an_argparse_error_naming_the_value(verdicts: Any, version: str) -> None:
    result = verdicts[version, "sm120"]["bogus-moe"]
    assert not result["ok"]
    assert result["error_type"] == "ArgumentError"
    assert "--moe-runner-backend" in result["error"] and "'bogus'" in result["error"]
    assert result["values"] == {}


@pytest.mark.parametrize("version", sglang_oracle.VERSIONS)
def test_accepted_config_reports_every_flag_with_final_values(verdicts: Any, version: str) -> None:
    result = verdicts[version, "sm120"]["fp4"]
    assert result["ok"] and result["error"] is None
    tables = _flag_tables()
    assert set(result["values"]) == set(tables[version]["flags"])
    assert result["values"]["tp-size"] == 8
    assert result["values"]["quantization"] == "modelopt_fp4"


@pytest.mark.parametrize("version", sglang_oracle.VERSIONS)
def test_nextn_becomes_eagle_with_draft_tokens_steps_plus_one(verdicts: Any, version: str) -> None:
    values = verdicts[version, "sm120"]["nextn"]["values"]
    assert values["speculative-algorithm"] == "EAGLE"
    assert values["speculative-num-draft-tokens"] == 4
    assert values["max-running-requests"] == 48


def test_sm120_fp4_moe_auto_resolves_to_flashinfer_cutlass_in_current_release(verdicts: Any) -> None:
    assert verdicts["0.5.23", "sm120"]["fp4"]["values"]["moe-runner-backend"] == "flashinfer_cutlass"
    # Only with an explicit --quantization, and only on SM120.
    assert verdicts["0.5.23", "sm120"]["no-quant"]["values"]["moe-runner-backend"] == "auto"
    # On SM100 the same resolution picks the trtllm-gen kernels, already at argument time.
    assert verdicts["0.5.23", "sm100"]["fp4"]["values"]["moe-runner-backend"] == "flashinfer_trtllm"
    # The March release has no such adjustment.
    assert verdicts["0.5.9", "sm120"]["fp4"]["values"]["moe-runner-backend"] == "auto"


def test_speculative_moe_runner_trtllm_is_refused_only_by_the_march_release(verdicts: Any) -> None:
    march = verdicts["0.5.9", "sm100"]["spec-moe-trtllm"]
    assert march["error_type"] == "AssertionError"
    assert "speculative MoE runner backend cannot be flashinfer_trtllm" in march["error"]
    assert march["where"].startswith("sglang/srt/server_args.py:")
    assert verdicts["0.5.23", "sm100"]["spec-moe-trtllm"]["ok"]


@pytest.mark.parametrize("version", sglang_oracle.VERSIONS)
def test_checks_after_processing_run_too(verdicts: Any, version: str) -> None:
    ep = verdicts[version, "sm120"]["cutlass-moe-ep2"]
    assert ep["error_type"] == "AssertionError" and "expert parallel size" in ep["error"]
    nodes = verdicts[version, "sm120"]["nnodes-3"]  # check_server_args, after resolution
    assert not nodes["ok"] and "divisible by number of nodes" in nodes["error"]


@pytest.mark.parametrize("version", sglang_oracle.VERSIONS)
def test_bare_assert_is_explained_by_its_statement(verdicts: Any, version: str) -> None:
    result = verdicts[version, "sm120"]["dp-attention-3"]
    assert result["error_type"] == "AssertionError" and result["error"] == ""
    assert result["statement"].startswith("assert ") and "tp_size %" in result["statement"]
    assert result["where"].startswith("sglang/srt/")


def test_renamed_mamba_flag_is_unknown_to_the_current_release(verdicts: Any) -> None:
    current = verdicts["0.5.23", "sm120"]["old-mamba-flag"]
    assert current["error_type"] == "ArgumentError"
    assert "--mamba-scheduler-strategy" in current["error"]
    march = verdicts["0.5.9", "sm120"]["old-mamba-flag"]
    assert march["ok"] and march["values"]["mamba-scheduler-strategy"] == "extra_buffer"


def test_cases_are_isolated_from_each_other() -> None:
    fp4, spec = _argv("0.5.23", FP4), _argv("0.5.23", CASES["nextn"])
    first, _, again = sglang_oracle.evaluate("0.5.23", "sm120", [fp4, spec, fp4])
    # SGLang draws random-seed afresh for each launch that leaves it unset.
    for result in (first, again):
        assert isinstance(result["values"].pop("random-seed"), int)
    assert first == again
    assert first["values"]["speculative-algorithm"] is None


def test_unknown_gpu_is_refused() -> None:
    with pytest.raises(ValueError, match="'sm80'"):
        sglang_oracle.evaluate("0.5.23", "sm80", [BASE])


def _flag_tables() -> dict[str, Any]:
    from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import catalog

    return catalog.raw_tables()
