"""The profile's timing model: calibration, batching, speculative decoding, determinism."""

from __future__ import annotations

import random

import pytest

from bwtune.standin.batch import BatchSimulator, SimRequest, predict_output_throughput
from bwtune.standin.performance import ConfigPerformance
from bwtune.standin.profile import ProfileError, load_profile, shipped_profiles

BASELINE = {"moe-runner-backend": "flashinfer_cutlass", "fp4-gemm-backend": "flashinfer_cudnn"}


@pytest.fixture
def rtx():
    return load_profile("rtx-pro-6000x8-qwen35-397b-nvfp4")


def test_shipped_profiles_load_and_default_is_rtx(monkeypatch):
    assert set(shipped_profiles()) >= {"rtx-pro-6000x8-qwen35-397b-nvfp4", "b200x8-qwen35-397b-nvfp4"}
    monkeypatch.delenv("BWTUNE_STANDIN_PROFILE", raising=False)
    profile = load_profile()
    assert profile.gpu.arch == "sm120" and profile.gpu.count == 8
    assert load_profile("b200x8-qwen35-397b-nvfp4").gpu.arch == "sm100"


def test_calibrated_to_public_single_request_figures(rtx):
    base = ConfigPerformance.for_flags(rtx, BASELINE)
    assert base.decode_tok_s_per_request(1) == pytest.approx(72, abs=1)
    mtp = ConfigPerformance.for_flags(rtx, {**BASELINE, "speculative-algorithm": "NEXTN"})
    assert 1.8 < mtp.decode_tok_s_per_request(1) / base.decode_tok_s_per_request(1) < 2.3
    triton = ConfigPerformance.for_flags(rtx, {**BASELINE, "attention-backend": "triton"})
    assert triton.decode_tok_s_per_request(1) == pytest.approx(42, abs=1)
    assert any("42 tok/s" in r for r in triton.reasons)


def test_batch_16_slower_per_request_faster_in_total(rtx):
    perf = ConfigPerformance.for_flags(rtx, BASELINE)
    one, sixteen = perf.decode_tok_s_per_request(1), perf.decode_tok_s_per_request(16)
    assert sixteen < one and 16 * sixteen > 5 * one
    assert rtx.decode_step_ms(12) == pytest.approx((20.5 + 26.0) / 2)  # linear between points
    assert rtx.decode_step_ms(512) > rtx.decode_step_ms(256)  # extrapolated


def test_accept_length_capped_by_draft_tokens(rtx):
    perf = ConfigPerformance.for_flags(rtx, {"speculative-algorithm": "EAGLE", "speculative-num-steps": 1})
    assert perf.spec is not None and perf.spec.num_draft_tokens == 2
    assert [k for k, _ in perf.spec.distribution] == [1, 2]
    assert perf.spec.mean_accept_length == pytest.approx(1 * 0.10 + 2 * 0.90)


def test_simulator_deterministic_for_a_seed(rtx):
    perf = ConfigPerformance.for_flags(rtx, {"speculative-algorithm": "NEXTN"})

    def run(seed: int) -> list[float]:
        sim = BatchSimulator(perf, random.Random(seed), 8)
        for _ in range(4):
            sim.add(SimRequest(100, 50))
        durations = []
        while sim.has_work():
            durations.append(sim.plan_step())
            sim.finish_step()
        return durations

    assert run(7) == run(7) and run(7) != run(8)


def test_prefill_step_then_decode_and_max_running(rtx):
    perf = ConfigPerformance.for_flags(rtx, BASELINE)
    sim = BatchSimulator(perf, random.Random(0), max_running=2)
    sim.step_noise_cv, sim.launch_factor = 0.0, 1.0
    reqs = [SimRequest(1000, 3) for _ in range(3)]
    for r in reqs:
        sim.add(r)
    assert sim.plan_step() == pytest.approx(0.020 + 2000 / 10000)  # two admitted, prefill of 2000 tokens
    assert [(r.id, n) for r, n in sim.finish_step()] == [(reqs[0].id, 1), (reqs[1].id, 1)]
    assert sim.plan_step() == pytest.approx(0.0145)  # decode step at batch 2, baseline flags
    assert len(sim.waiting) == 1


def test_predicted_throughput_matches_closed_form(rtx):
    perf = ConfigPerformance.for_flags(rtx, BASELINE)
    # long outputs: prefill is negligible, so throughput -> C / step(C)
    got = predict_output_throughput(perf, 16, 8, 2000, 16)
    assert got == pytest.approx(16 / perf.step_seconds(16), rel=0.02)


def test_bad_profile_names_file_and_key(tmp_path):
    bad = tmp_path / "p.yml"
    bad.write_text("name: x\ngpu: {name: g, arch: sm120, compute_capability: '12.0', count: -1}\n")
    with pytest.raises(ProfileError, match=r"p\.yml: gpu\.count = -1(\.0)? must be > 0"):
        load_profile(str(bad))
    with pytest.raises(ProfileError, match="no such shipped profile or file"):
        load_profile("nope")
