"""Speculative decoding under load (issue 26): the draft work grows with the running batch
and the accept rate falls with it, so that above a batch the profile gives MTP loses."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_client import run_workload
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_workload import Workload
from bwtune.standin.batch import BatchSimulator, SimRequest, predict_output_throughput
from bwtune.standin.performance import ConfigPerformance, spec_crossover_batch
from bwtune.standin.profile import PROFILES_DIR, ProfileError, load_profile

MTP3 = {
    "speculative-algorithm": "NEXTN",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 1,
    "speculative-num-draft-tokens": 4,
}
MTP1 = {**MTP3, "speculative-num-steps": 1, "speculative-num-draft-tokens": 2}


@pytest.fixture(scope="module")
def rtx():
    return load_profile("rtx-pro-6000x8-qwen35-397b-nvfp4")


def test_single_stream_speedup_is_about_the_accept_length_over_the_step_cost(rtx):
    on, off = ConfigPerformance.for_flags(rtx, MTP3), ConfigPerformance.for_flags(rtx, {})
    assert on.spec is not None
    expected = on.spec.mean_accept_length / rtx.speculative.step_factor(3)
    assert on.decode_tok_s_per_request(1) / off.decode_tok_s_per_request(1) == pytest.approx(expected)
    assert 1.8 < expected < 2.3


def test_accept_length_falls_with_the_batch(rtx):
    spec = ConfigPerformance.for_flags(rtx, MTP3).spec
    assert spec is not None
    means = [spec.mean_accept_length_at(b) for b in (1, 8, 32, 128)]
    assert means == sorted(means, reverse=True) and means[0] > means[-1] > 1.0
    h = rtx.speculative.accept_halving_batch
    assert spec.mean_accept_length_at(int(h) + 1) - 1 == pytest.approx((spec.mean_accept_length - 1) / 2)
    # The draws follow the batch's distribution (a batch of 128 accepts fewer than one of 1).
    rng = random.Random(1)
    draws = {b: sum(spec.draw(rng, b) for _ in range(4000)) / 4000 for b in (1, 128)}
    assert draws[1] == pytest.approx(spec.mean_accept_length_at(1), rel=0.05)
    assert draws[128] == pytest.approx(spec.mean_accept_length_at(128), rel=0.05)


def test_the_simulator_reports_the_accept_length_of_the_batch_it_ran(rtx):
    perf = ConfigPerformance.for_flags(rtx, MTP3)
    assert perf.spec is not None
    for batch in (1, 48):
        sim = BatchSimulator(perf, random.Random(3), max_running=batch)
        for _ in range(batch):
            sim.add(SimRequest(16, 10_000))
        sim.plan_step()
        sim.finish_step()  # the prefill
        for _ in range(200):
            sim.plan_step()
            sim.finish_step()
        accept = sim.avg_spec_accept_length()
        assert accept == pytest.approx(perf.spec.mean_accept_length_at(batch), rel=0.05), batch


def test_draft_cost_grows_with_the_batch(rtx):
    on, off = ConfigPerformance.for_flags(rtx, MTP3), ConfigPerformance.for_flags(rtx, {})
    ratios = [on.step_seconds(b) / off.step_seconds(b) for b in (1, 8, 32, 64, 128)]
    assert ratios[0] == pytest.approx(rtx.speculative.step_factor(3))
    assert ratios == sorted(ratios) and ratios[-1] > 2 * ratios[0]


@pytest.mark.parametrize("flags", [MTP3, MTP1], ids=["steps3", "steps1"])
def test_crossover_batch_separates_where_mtp_wins_and_loses(rtx, flags):
    crossover = spec_crossover_batch(rtx, flags)
    assert crossover is not None and 8 < crossover < 128
    on, off = ConfigPerformance.for_flags(rtx, flags), ConfigPerformance.for_flags(rtx, {})
    below, above = int(crossover * 0.8), int(crossover * 1.25) + 1
    assert on.decode_tok_s_per_request(below) > off.decode_tok_s_per_request(below)
    assert on.decode_tok_s_per_request(above) < off.decode_tok_s_per_request(above)
    # Closed-loop throughput through the simulator agrees (long outputs: decode dominates).
    runs = {"max_running": 256, "input_len": 16, "output_len": 512}
    for concurrency, mtp_wins in ((below, True), (above, False)):
        n = concurrency * 2
        got_on = predict_output_throughput(
            on, concurrency, runs["input_len"], runs["output_len"], n, 256, seed=1
        )
        got_off = predict_output_throughput(
            off, concurrency, runs["input_len"], runs["output_len"], n, 256, seed=1
        )
        assert (got_on > got_off) is mtp_wins, (concurrency, got_on, got_off)


def test_fewer_draft_tokens_lose_later(rtx):
    three, one = spec_crossover_batch(rtx, MTP3), spec_crossover_batch(rtx, MTP1)
    assert three is not None and one is not None and one > three


def test_without_the_load_keys_speculative_cost_is_flat(tmp_path: Path):
    data = yaml.safe_load((PROFILES_DIR / "rtx-pro-6000x8-qwen35-397b-nvfp4.yml").read_text())
    for key in ("draft_cost_ms_per_token", "verify_knee_tokens", "accept_halving_batch"):
        data["speculative"].pop(key)
    path = tmp_path / "flat.yml"
    path.write_text(yaml.safe_dump(data))
    flat = load_profile(str(path))
    assert spec_crossover_batch(flat, MTP3) is None
    spec = ConfigPerformance.for_flags(flat, MTP3).spec
    assert spec is not None and spec.mean_accept_length_at(256) == spec.mean_accept_length


def test_no_speculative_flags_no_crossover(rtx):
    assert spec_crossover_batch(rtx, {"moe-runner-backend": "flashinfer_cutlass"}) is None


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("draft_cost_ms_per_token", -1.0, "speculative.draft_cost_ms_per_token = -1.0 must be >= 0"),
        ("verify_knee_tokens", -5.0, "speculative.verify_knee_tokens = -5.0 must be >= 0"),
        ("accept_halving_batch", 0, "speculative.accept_halving_batch = 0.0 must be > 0"),
        ("accept_halving_batch", "many", "speculative.accept_halving_batch = 'many' is not"),
    ],
)
def test_bad_load_keys_are_refused_naming_the_key(tmp_path: Path, key, value, message):
    data = yaml.safe_load((PROFILES_DIR / "rtx-pro-6000x8-qwen35-397b-nvfp4.yml").read_text())
    data["speculative"][key] = value
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match=message.replace("(", r"\(")) as err:
        load_profile(str(path))
    assert str(path) in str(err.value)


# ---------------------------------------------------------------- on a live stand-in


@pytest.mark.slow  # two short capacity rounds per API on a live stand-in: ~20 s
@pytest.mark.parametrize("api", ["generate", "completions"])
def test_a_capacity_search_records_the_accept_length(healthy, api):
    """/generate answers carry meta_info spec_verify_ct (as SGLang's); /v1/completions do not,
    and the client splits /server_info's cumulative avg_spec_accept_length per round."""
    server = healthy("--speculative-algorithm", "NEXTN", "--mamba-radix-cache-strategy", "extra_buffer")
    spec = {"slo": {"p99_ttft_ms": 60000}, "start_rate": 20.0, "max_rate": 40.0, "max_rounds": 2}
    w = Workload.from_dict({"name": "cap", "input_len": 64, "output_len": 32, "api": api, "capacity": spec})
    out = run_workload("127.0.0.1", server.port, w)
    accept = out["values"]["accept_length"]
    assert accept is not None and 1.5 < accept <= 4.0, out["values"]
