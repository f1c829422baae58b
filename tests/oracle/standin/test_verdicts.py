"""The stand-in and real SGLang agree on flag sets the planner never produced (the rest of the
stand-in's verdicts, without real SGLang: tests/unit/standin/test_verdicts.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bwtune.standin import verdicts
from bwtune.standin.args import flag_table, parse

REPO = Path(__file__).resolve().parents[3]
MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"


@pytest.mark.oracle
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_standin_and_real_sglang_agree_on_flag_sets_the_planner_never_saw(monkeypatch):
    """Flag sets drawn at random from the release's flag choices (not planned by bwtune): the
    stand-in (recorded verdicts, else real SGLang's own processing) and real SGLang agree."""
    from bwtune.standin.__main__ import StartupFailure, prepare
    from tests.oracle import releases, sglang_oracle

    version, gpu = "0.5.23", "sm120"
    flags = flag_table(version)
    rng = random.Random(23)
    axes = {
        "moe-runner-backend": flags["moe-runner-backend"]["choices"],
        "fp4-gemm-backend": flags["fp4-gemm-backend"]["choices"],
        "attention-backend": ["triton", "flashinfer", "trtllm_mha", "fa3", "torch_native"],
        "kv-cache-dtype": ["auto", "fp8_e4m3", "bf16"],
        "tp-size": ["1", "2", "4", "8"],
        "ep-size": ["1", "2", "8"],
    }
    sample = []
    while len(sample) < 16:
        chosen = rng.sample(sorted(axes), rng.randint(2, 4))
        argv = ["--model-path", str(MODEL), "--quantization", "modelopt_fp4"]
        for flag in chosen:
            argv += [f"--{flag}", rng.choice(axes[flag])]
        if argv not in sample:
            sample.append(argv)
    truth = sglang_oracle.evaluate(version, gpu, sample)
    releases.ensure(version)
    monkeypatch.setenv("BWTUNE_STANDIN_PROFILE", "rtx-pro-6000x8-qwen35-397b-nvfp4")
    monkeypatch.setenv(verdicts.PYTHON_ENV, str(releases.shared_python()))
    monkeypatch.setenv(verdicts.PYTHONPATH_ENV, releases.pythonpath(version))
    asked = 0
    for argv, real in zip(sample, truth, strict=True):
        asked += verdicts.lookup(version, gpu, parse(argv, flags).explicit) is None
        try:
            state, _ = prepare(list(argv))
        except StartupFailure as failure:
            assert not real["ok"], f"stand-in refused what SGLang accepts: {argv}\n{failure.text}"
            assert real["error"] in failure.text, argv
            continue
        assert real["ok"], f"stand-in accepted what SGLang refuses ({real['error']}): {argv}"
        for flag in ("moe-runner-backend", "fp4-gemm-backend", "attention-backend", "ep-size"):
            assert state.resolved.get(flag) == real["values"][flag], (flag, argv)
    assert asked > 0  # some went to real SGLang itself, the rest to the recorded verdicts
