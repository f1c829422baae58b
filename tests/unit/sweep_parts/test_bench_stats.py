"""Run metrics from known per-request timings: bench_serving's definitions, exactly."""

from __future__ import annotations

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_stats import (
    RequestTiming,
    Slo,
    run_metrics,
)


def timing(ttft: float, itl: list[float], tail: float = 0.0, prompt_len: int = 10) -> RequestTiming:
    """A streamed request: first token after ttft, then one per itl gap, [DONE] `tail` later."""
    return RequestTiming(
        ok=True,
        prompt_len=prompt_len,
        output_len=len(itl) + 1,
        start=50.0,
        ttft=ttft,
        latency=ttft + sum(itl) + tail,
        itl=list(itl),
    )


def test_metrics_of_known_timings():
    a = timing(0.030, [0.002] * 4)  # 5 tokens: e2e 38 ms
    b = timing(0.050, [0.004] * 4, tail=0.004)  # 5 tokens: e2e 70 ms
    failed = RequestTiming(ok=False, prompt_len=10, error="HTTP 500: x")
    m = run_metrics([a, b, failed], duration_s=0.5)
    assert (m["completed"], m["failed"]) == (2, 1)
    assert (m["total_input_tokens"], m["total_output_tokens"]) == (20, 10)
    assert m["request_throughput"] == pytest.approx(4.0)
    assert m["output_throughput"] == pytest.approx(20.0)
    assert m["total_throughput"] == pytest.approx(60.0)
    assert m["median_ttft_ms"] == pytest.approx(40.0) and m["p99_ttft_ms"] == pytest.approx(49.8)
    assert m["mean_itl_ms"] == pytest.approx(3.0) and m["median_itl_ms"] == pytest.approx(3.0)
    assert m["p90_itl_ms"] == pytest.approx(4.0)
    # TPOT = (latency - TTFT) / (n - 1): the [DONE] tail counts, the ITL does not see it
    assert m["mean_tpot_ms"] == pytest.approx((2.0 + 5.0) / 2)
    assert m["median_e2e_latency_ms"] == pytest.approx(54.0)
    assert m["output_tok_s_per_request"] == pytest.approx((4 / 0.008 + 4 / 0.020) / 2)
    assert m["concurrency"] == pytest.approx((0.038 + 0.070) / 0.5)
    assert m["accept_length"] is None and "goodput" not in m


def test_goodput_counts_only_requests_within_the_slo():
    fast, slow_first, slow_decode = (
        timing(0.030, [0.002] * 4),
        timing(0.300, [0.002] * 4),
        timing(0.030, [0.02] * 4),
    )
    m = run_metrics([fast, slow_first, slow_decode], duration_s=2.0, slo=Slo(ttft_ms=100, tpot_ms=10))
    assert m["goodput"] == pytest.approx(0.5)
    assert run_metrics([fast, slow_first], 2.0, Slo(e2e_ms=100))["goodput"] == pytest.approx(0.5)


def test_accept_length_is_tokens_over_verify_steps():
    a, b = timing(0.03, [0.002] * 7), timing(0.03, [0.002] * 3)  # 8 and 4 tokens
    a.spec_verify_ct, b.spec_verify_ct = 2, 2
    assert run_metrics([a, b], 1.0)["accept_length"] == pytest.approx(3.0)
