"""The benchmark client against a local streaming server with known timing."""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import urllib.request
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils.bench_client import (
    SAMPLES_PER_REPETITION,
    BenchClient,
    Workload,
    _Response,
    run_workload,
)
from ansible_collections.bwtune.sglang.plugins.module_utils.bench_stats import Slo
from ansible_collections.bwtune.sglang.plugins.module_utils.bench_workload import WorkloadError


def stats(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats") as r:
        return json.loads(r.read())


def c_tokens(port: int) -> int:
    return len(stats(port)["sends"])


def rep0(result: dict[str, Any]) -> dict[str, Any]:
    return result["repetitions"][0]


def test_itl_and_ttft_match_the_server_timing(sse_server):
    port = sse_server("--ttft-ms", "30", "--itl-ms", "2")
    w = Workload(input_len=64, output_len=100, num_prompts=8, concurrency=4, warmup=1)
    m = rep0(run_workload("127.0.0.1", port, w))
    assert m["completed"] == 8 and m["failed"] == 0
    assert m["total_output_tokens"] == 800
    # Against what the server actually did (on a busy machine it can fall behind its schedule).
    sends = [s["times"] for s in stats(port)["sends"] if len(s["times"]) == 100]
    gaps = sorted(b - a for t in sends for a, b in itertools.pairwise(t))
    assert len(gaps) == 8 * 99
    assert m["median_itl_ms"] == pytest.approx(gaps[len(gaps) // 2] * 1000, abs=0.3)
    assert m["mean_itl_ms"] == pytest.approx(sum(gaps) / len(gaps) * 1000, abs=0.3)
    assert m["mean_itl_ms"] == pytest.approx(2.0, abs=0.3)
    assert m["median_ttft_ms"] == pytest.approx(30.0, abs=8.0)
    # TPOT = (latency - TTFT) / (n - 1): the ITL again, plus the [DONE] tail.
    assert m["median_tpot_ms"] == pytest.approx(2.0, abs=0.3)
    # one stream: 99 tokens after the first in 99 * 2 ms
    assert m["output_tok_s_per_request"] == pytest.approx(500.0, rel=0.12)
    # 8 requests, 4 at a time, each ~30 + 99 * 2 = 228 ms: two waves.
    assert m["duration_s"] == pytest.approx(0.456, rel=0.25)
    assert m["output_throughput"] == pytest.approx(800 / m["duration_s"])
    assert m["total_throughput"] == pytest.approx((800 + 8 * 64) / m["duration_s"])
    assert m["accept_length"] is None


def test_chunk_timestamps_are_the_arrival_times_of_the_server_sends(sse_server):
    """The client's per-token times, against when the server wrote each event (same clock)."""
    port = sse_server("--ttft-ms", "10", "--itl-ms", "2")

    async def go() -> list[Any]:
        c = BenchClient("127.0.0.1", port)
        try:
            # prompt lengths 16..19 tell the server's records apart
            raws = [(c.generate_request(list(range(16 + i)), 60), 16 + i) for i in range(4)]
            return list(await asyncio.gather(*(c.request(r, n) for r, n in raws)))
        finally:
            c.close()

    results = asyncio.run(go())
    sends = {s["prompt_len"]: s["times"] for s in stats(port)["sends"]}
    delays: list[float] = []
    for r in results:
        times = list(itertools.accumulate(r.itl, initial=r.start + r.ttft))
        sent = sends[r.prompt_len]
        assert len(sent) == len(times) == 60
        delays += [t - s for t, s in zip(times, sent, strict=True)]
    delays.sort()
    assert delays[0] >= 0  # never before the server sent it
    assert delays[len(delays) // 2] < 0.001  # median delay from write() to our timestamp: < 1 ms
    # and the client's gaps are the server's gaps
    server_gaps = sorted(b - a for s in sends.values() for a, b in itertools.pairwise(s))
    client_gaps = sorted(x for r in results for x in r.itl)
    assert client_gaps[len(client_gaps) // 2] == pytest.approx(server_gaps[len(server_gaps) // 2], abs=0.0002)


def test_events_split_across_http_chunks_are_reassembled(sse_server):
    port = sse_server("--itl-ms", "1", "--split-events")
    m = rep0(run_workload("127.0.0.1", port, Workload(output_len=20, num_prompts=3, input_len=4)))
    assert m["completed"] == 3 and m["total_output_tokens"] == 60


def test_closed_loop_keeps_exactly_concurrency_in_flight_and_reuses_connections(sse_server):
    port = sse_server("--ttft-ms", "5", "--itl-ms", "1")
    w = Workload(input_len=8, output_len=30, num_prompts=24, concurrency=6, warmup=0)
    m = rep0(run_workload("127.0.0.1", port, w))
    s = stats(port)
    assert m["completed"] == 24
    assert s["max_in_flight"] == 6
    assert s["requests"] == 24
    # keep-alive: one connection per worker (plus the /server_info probe's)
    assert s["connections"] <= 8


def test_connection_close_servers_work_too(sse_server):
    port = sse_server("--itl-ms", "1", "--close")
    w = Workload(input_len=8, output_len=10, num_prompts=5, concurrency=2, warmup=0)
    m = rep0(run_workload("127.0.0.1", port, w))
    assert m["completed"] == 5 and stats(port)["connections"] >= 5


def test_poisson_arrivals_are_seeded_and_have_the_requested_rate(sse_server):
    port = sse_server("--ttft-ms", "1", "--itl-ms", "1")
    w = Workload(
        input_len=4, output_len=2, num_prompts=60, concurrency=None, request_rate=100.0, warmup=0, seed=7
    )
    run_workload("127.0.0.1", port, w)
    arrivals = stats(port)["arrivals"]
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert len(gaps) == 59
    # mean gap 1/rate = 10 ms (59 exponential draws: well within 40%)
    assert statistics.mean(gaps) == pytest.approx(0.010, rel=0.4)
    # exponential: coefficient of variation ~1, far from a fixed-interval schedule
    assert statistics.stdev(gaps) / statistics.mean(gaps) > 0.5

    port2 = sse_server("--ttft-ms", "1", "--itl-ms", "1")
    run_workload("127.0.0.1", port2, w)
    gaps2 = [b - a for a, b in itertools.pairwise(stats(port2)["arrivals"])]
    # same seed, same schedule (to within scheduling noise)
    assert statistics.mean(gaps2) == pytest.approx(statistics.mean(gaps), rel=0.15)


def test_api_key_is_sent_as_bearer_and_never_shown(sse_server):
    port = sse_server("--api-key", "s3cret", "--itl-ms", "1")
    client = BenchClient("127.0.0.1", port, api_key="s3cret")
    assert "s3cret" not in repr(client) and "s3cret" not in repr(client.http)
    m = rep0(
        run_workload("127.0.0.1", port, Workload(input_len=4, output_len=5, num_prompts=2), api_key="s3cret")
    )
    assert m["completed"] == 2
    assert set(stats(port)["auth_seen"]) == {"Bearer s3cret"}


def test_wrong_api_key_fails_requests_with_the_status(sse_server):
    port = sse_server("--api-key", "s3cret")
    out = run_workload(
        "127.0.0.1", port, Workload(input_len=4, output_len=5, num_prompts=2, warmup=0), api_key="bad"
    )
    m = rep0(out)
    assert m["completed"] == 0 and m["failed"] == 2
    assert m["errors"] == ["HTTP 401: Unauthorized"]
    assert "bad" not in json.dumps(out)


def test_server_errors_are_counted_not_raised(sse_server):
    port = sse_server("--fail-every", "3", "--itl-ms", "1")
    m = rep0(run_workload("127.0.0.1", port, Workload(input_len=4, output_len=5, num_prompts=9, warmup=0)))
    assert (m["completed"], m["failed"]) == (6, 3)
    assert m["errors"] == ["HTTP 500: simulated failure"]


def test_error_event_mid_stream_fails_the_request(sse_server):
    port = sse_server("--error-after", "3", "--itl-ms", "1")
    m = rep0(run_workload("127.0.0.1", port, Workload(input_len=4, output_len=10, num_prompts=2, warmup=0)))
    assert m["failed"] == 2
    assert "probability tensor contains" in m["errors"][0]


def test_refused_connection_is_a_failed_request():
    m = rep0(run_workload("127.0.0.1", 1, Workload(input_len=4, output_len=5, num_prompts=2, warmup=0)))
    assert m["failed"] == 2 and "ConnectionRefusedError" in m["errors"][0]


def test_multi_token_chunks_split_the_gap_and_give_accept_length(sse_server):
    port = sse_server("--tokens-per-chunk", "4", "--itl-ms", "2")
    w = Workload(input_len=4, output_len=40, num_prompts=2, concurrency=1, warmup=0)
    m = rep0(run_workload("127.0.0.1", port, w))
    assert m["accept_length"] == pytest.approx(4.0)
    # a chunk of 4 every 8 ms: 4 gaps of 2 ms each
    assert m["median_itl_ms"] == pytest.approx(2.0, abs=0.3)


def test_completions_api_streams_and_counts_usage(sse_server):
    port = sse_server("--itl-ms", "2")
    w = Workload(input_len=4, output_len=30, num_prompts=3, concurrency=3, api="completions", warmup=0)
    m = rep0(run_workload("127.0.0.1", port, w))
    assert m["completed"] == 3 and m["total_output_tokens"] == 90
    sends = [s["times"] for s in stats(port)["sends"] if len(s["times"]) == 30]
    gaps = sorted(b - a for t in sends for a, b in itertools.pairwise(t))
    assert m["median_itl_ms"] == pytest.approx(gaps[len(gaps) // 2] * 1000, abs=0.3)


def test_non_streaming_mode(sse_server):
    port = sse_server("--ttft-ms", "10", "--itl-ms", "1")
    w = Workload(input_len=4, output_len=11, num_prompts=2, stream=False, warmup=0)
    m = rep0(run_workload("127.0.0.1", port, w))
    assert m["completed"] == 2 and m["total_output_tokens"] == 22
    # the server answers after 10 + 10 * 1 ms; a busy machine only adds
    assert 20 <= m["median_e2e_latency_ms"] < 60
    assert m["median_ttft_ms"] == m["median_e2e_latency_ms"]  # no stream: first token = whole answer


def test_repetitions_give_ci_and_cv_and_goodput(sse_server):
    port = sse_server("--ttft-ms", "5", "--itl-ms", "1")
    slo = Slo(ttft_ms=1000, tpot_ms=1000)
    w = Workload(input_len=4, output_len=10, num_prompts=4, concurrency=2, repetitions=3, slo=slo)
    out = run_workload("127.0.0.1", port, w)
    assert out["n"] == 3 and len(out["repetitions"]) == 3
    lo, hi = out["ci95"]["output_throughput"]
    assert lo <= out["values"]["output_throughput"] <= hi
    assert out["cv"]["output_throughput"] >= 0
    assert out["values"]["goodput"] == pytest.approx(out["values"]["request_throughput"])
    assert out["workload"]["slo"] == {"ttft_ms": 1000, "tpot_ms": 1000}


def test_generate_text_returns_the_answer(sse_server):
    port = sse_server("--ttft-ms", "1", "--itl-ms", "1")

    async def go() -> tuple[bool, str, dict[str, Any]]:
        c = BenchClient("127.0.0.1", port)
        try:
            return await c.generate_text("The capital of France is", 8)
        finally:
            c.close()

    ok, text, meta = asyncio.run(go())
    assert ok and text == " Paris and that is all." and meta["completion_tokens"] == 5
    assert c_tokens(port) == 0  # answered by the gate path, not the token streamer


@pytest.mark.parametrize(
    ("raw", "expect"),
    [
        (
            {"input_len": 0},
            "workload 'w': input_len must be an integer >= 1, got 0",
        ),
        ({"api": "chat"}, "workload 'w': api must be one of generate, completions, got 'chat'"),
        ({"concurency": 3}, "workload 'w': unknown key 'concurency'"),
        ({"request_rate": -1}, "workload 'w': request_rate must be a number > 0, got -1"),
    ],
)
def test_bad_workloads_name_the_value(raw, expect):
    with pytest.raises(WorkloadError) as e:
        Workload.from_dict(raw, name="w")
    assert str(e.value) == expect


def test_workload_from_dict_reads_slo_keys():
    w = Workload.from_dict({"name": "chat", "output_len": 8, "slo_ttft_ms": 200, "slo": {"tpot_ms": 50}})
    assert w.slo == Slo(ttft_ms=200, tpot_ms=50)


def test_chunked_parser_handles_arbitrary_splits():
    body = b"data: one\n\ndata: two\n\n"
    wire = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n%s\r\n" % (len(body), body)
        + b"0\r\n\r\n"
    )
    for size in (1, 2, 3, 5, 7, len(wire)):
        loop = asyncio.new_event_loop()
        try:
            got = bytearray()

            def sink(data: bytes, _t: float, got: bytearray = got) -> None:
                got.extend(data)

            resp = _Response(sink, loop.create_future())
            for i in range(0, len(wire), size):
                resp.feed(wire[i : i + size], 0.0)
            assert resp.done.done() and bytes(got) == body, size
        finally:
            loop.close()


def test_a_sample_of_each_repetitions_own_requests_is_kept_for_the_gate(sse_server):
    port = sse_server("--itl-ms", "1")
    w = Workload(input_len=4, output_len=5, num_prompts=20, concurrency=20, repetitions=2, warmup=0)
    samples: list[dict[str, Any]] = []
    run_workload("127.0.0.1", port, w, output_samples=samples)
    assert len(samples) == 2 * SAMPLES_PER_REPETITION
    for rep in (0, 1):
        indices = [s["index"] for s in samples if s["rep"] == rep]
        assert indices[0] == 0 and indices[-1] == 19 and indices == sorted(set(indices))
    assert all(s["ok"] and s["greedy"] and s["text"] and s["workload"] == "default" for s in samples)
    # a streamed /v1/completions answer has no full text to judge
    streamed: list[dict[str, Any]] = []
    run_workload("127.0.0.1", port, Workload(input_len=4, output_len=5, num_prompts=3, api="completions",
                                             warmup=0), output_samples=streamed)  # fmt: skip
    assert len(streamed) == 3 and all(s["text"] is None for s in streamed)
