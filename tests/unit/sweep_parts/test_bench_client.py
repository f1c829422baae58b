"""The benchmark client against a local streaming server with known timing."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import statistics
import time
import urllib.request
from types import SimpleNamespace
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import bench_client
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_client import (
    SAMPLES_PER_REPETITION,
    BenchClient,
    RequestResult,
    Workload,
    run_workload,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_stats import Slo
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_workload import WorkloadError
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.http_stream import _Response

from .client_probe import FLOAT_SLACK_S, ClientProbe, itl_bounds


def stats(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats") as r:
        return json.loads(r.read())


def c_tokens(port: int) -> int:
    return len(stats(port)["sends"])


def rep0(result: dict[str, Any]) -> dict[str, Any]:
    return result["repetitions"][0]


def test_itl_and_ttft_match_the_server_timing(sse_server, monkeypatch):
    """The reported figures against what the server did, within the bounds this run allows.

    Every token's client stamp lies between the server's send and the client's parse start
    (client_probe), so each ITL, TTFT and TPOT lies in an interval measured per request in
    this very run, and so do their medians and means (order statistics and means are
    monotone in every value). A loaded machine widens the intervals; it cannot move a
    correct figure out of them. The arithmetic itself is checked exactly on injected
    timestamps (test_request_timing_from_arrival_times, test_bench_stats.py)."""
    port = sse_server("--ttft-ms", "30", "--itl-ms", "2")
    probe = ClientProbe(monkeypatch)
    w = Workload(input_len=64, output_len=100, num_prompts=8, concurrency=4, warmup=0)
    m = rep0(run_workload("127.0.0.1", port, w))
    assert m["completed"] == 8 and m["failed"] == 0
    assert m["total_output_tokens"] == 800
    assert m["output_throughput"] == pytest.approx(800 / m["duration_s"])
    assert m["total_throughput"] == pytest.approx((800 + 8 * 64) / m["duration_s"])
    assert m["accept_length"] is None

    s = stats(port)
    sends = {rec["id"]: rec["times"] for rec in s["sends"]}
    starts = probe.parse_starts
    assert sorted(sends) == sorted(starts) == sorted(probe.spans) and len(sends) == 8
    itl: list[tuple[float, float]] = []
    ttft: list[tuple[float, float]] = []
    tpot: list[tuple[float, float]] = []
    for rid, sent in sends.items():
        parsed, (entered, returned) = starts[rid], probe.spans[rid]
        assert len(sent) == len(parsed) == 100
        itl += itl_bounds(sent, parsed)
        # from the request (read by the server after the client stamped its start) to token 1
        ttft.append((sent[0] - s["arrived"][rid], parsed[0] - entered))
        # from token 1 to the end of the stream, over the 99 tokens after the first
        tpot.append(((sent[-1] - parsed[0]) / 99, (returned - sent[0]) / 99))
    assert_within(m["median_itl_ms"], itl, statistics.median)
    assert_within(m["mean_itl_ms"], itl, statistics.fmean)
    assert_within(m["median_ttft_ms"], ttft, statistics.median)
    assert_within(m["median_tpot_ms"], tpot, statistics.median)
    # The server never sends sooner than asked: 30 ms to the first token, then 2 ms a token.
    assert m["median_ttft_ms"] >= 30.0
    # 8 requests, 4 at a time: each worker waits out two requests of >= 30 + 99 * 2 ms.
    assert m["duration_s"] >= 2 * (0.030 + 99 * 0.002) - FLOAT_SLACK_S


def assert_within(reported_ms: float, bounds: list[tuple[float, float]], summary: Any) -> None:
    """`reported_ms` is `summary` of values each within its (low, high) seconds."""
    low = summary(lo for lo, _hi in bounds) * 1000 - FLOAT_SLACK_S * 1000
    high = summary(hi for _lo, hi in bounds) * 1000 + FLOAT_SLACK_S * 1000
    assert low <= reported_ms <= high, (low, reported_ms, high, load())


def load() -> str:
    """For failure messages only: the bounds above hold at any load."""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def test_chunk_timestamps_are_the_arrival_times_of_the_server_sends(sse_server, monkeypatch):
    """Each token's stamp is taken when its bytes arrive: never before the server sent them,
    never after the client began parsing them (client_probe); and the request's TTFT and ITLs
    are exactly those stamps' differences. Four streams at once, so tokens of one connection
    must not be stamped with another's arrivals."""
    port = sse_server("--ttft-ms", "10", "--itl-ms", "2")
    probe = ClientProbe(monkeypatch)

    async def go() -> list[RequestResult]:
        c = BenchClient("127.0.0.1", port)
        try:
            raws = [c.generate_request(list(range(16)), 60) for _i in range(4)]
            return list(await asyncio.gather(*(c.request(r, 16) for r in raws)))
        finally:
            c.close()

    results = asyncio.run(go())
    s = stats(port)
    sends = {rec["id"]: rec["times"] for rec in s["sends"]}
    stamps, starts = probe.token_times, probe.parse_starts
    assert len(results) == 4 and sorted(sends) == sorted(stamps) == sorted(starts)
    for r in results:
        rid = r.meta_info["id"]
        sent, stamped, parsed = sends[rid], stamps[rid], starts[rid]
        assert len(sent) == len(stamped) == len(parsed) == 60
        for i, (a, b, c) in enumerate(zip(sent, stamped, parsed, strict=True)):
            assert a <= b <= c, (rid, i, a, b, c, load())
        # the client's start precedes the server's reading of the request
        assert r.start <= s["arrived"][rid]
        # the figures are those stamps' differences, exactly (no other clock read between)
        assert r.ttft == stamped[0] - r.start
        assert r.itl == [b - a for a, b in itertools.pairwise(stamped)]


def test_request_timing_from_arrival_times(monkeypatch):
    """TTFT, ITL and latency from injected arrival times and a fake clock: exact arithmetic.
    A chunk of k tokens counts as k gaps of gap / k (bench_serving's definition)."""
    clock = iter([100.0, 100.5])  # request() reads the clock at the start and at the end
    monkeypatch.setattr(bench_client, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    events = [(100.030, 1), (100.032, 2), (100.040, 6), (100.041, 7)]  # (arrival, cumulative tokens)

    class ScriptedHttp:
        async def send(self, raw: bytes, on_body: Any = None, timeout_s: float | None = None) -> Any:
            for t, n in events:
                meta = {"id": "x", "completion_tokens": n, "finish_reason": None}
                on_body(b"data: " + json.dumps({"text": "", "meta_info": meta}).encode() + b"\n\n", t)
            on_body(b"data: [DONE]\n\n", 100.042)
            return SimpleNamespace(status=200, body=b"")

    client = BenchClient()
    client.http = ScriptedHttp()  # type: ignore[assignment]
    r = asyncio.run(client.request(b"", 8))
    assert r.ok and r.output_len == 7 and client.tokens_generated == 7
    assert r.start == 100.0 and r.latency == 0.5
    assert r.ttft == pytest.approx(0.030, abs=1e-12)
    assert r.itl == pytest.approx([0.002] + [0.002] * 4 + [0.001], abs=1e-12)


def test_events_split_across_http_chunks_are_reassembled(sse_server):
    port = sse_server("--itl-ms", "1", "--split-events")
    m = rep0(run_workload("127.0.0.1", port, Workload(output_len=20, num_prompts=3, input_len=4)))
    assert m["completed"] == 3 and m["total_output_tokens"] == 60


def test_closed_loop_keeps_exactly_concurrency_in_flight_and_reuses_connections(sse_server):
    # the server holds its answers until 6 are in flight: reaching 6 does not depend on speed
    port = sse_server("--ttft-ms", "5", "--itl-ms", "1", "--hold-until-in-flight", "6")
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


class _RecordingAsyncio:
    """bench_client's view of asyncio, with every sleep's delay recorded: the open loop's
    schedule of arrival gaps, as the client intends it."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        await asyncio.sleep(delay)


def poisson_run(monkeypatch: pytest.MonkeyPatch, port: int, w: Workload) -> tuple[list[float], float, Any]:
    """One repetition: (intended gaps, perf_counter just before it, results)."""
    recorder = _RecordingAsyncio()
    monkeypatch.setattr(bench_client, "asyncio", recorder)

    async def go() -> tuple[float, list[RequestResult]]:
        c = BenchClient("127.0.0.1", port)
        try:
            before = time.perf_counter()
            results, _duration = await c.run_repetition(w, 0)
            return before, results
        finally:
            c.close()

    before, results = asyncio.run(go())
    monkeypatch.undo()
    return recorder.sleeps, before, results


def test_poisson_arrivals_are_seeded_and_have_the_requested_rate(sse_server, monkeypatch):
    """The schedule (the gaps the client means to leave between sends) is checked exactly;
    the sends against it only from below: a loaded machine can send late, never early."""
    port = sse_server("--ttft-ms", "1", "--itl-ms", "1")
    w = Workload(
        input_len=4, output_len=2, num_prompts=60, concurrency=None, request_rate=100.0, warmup=0, seed=7
    )
    gaps, before, results = poisson_run(monkeypatch, port, w)
    assert len(gaps) == 59 and all(g > 0 for g in gaps)
    # Seeded: the same workload gives the same schedule, to the last bit; another seed another.
    assert poisson_run(monkeypatch, port, w)[0] == gaps
    assert poisson_run(monkeypatch, port, dataclasses.replace(w, seed=8))[0] != gaps
    # The requested rate, exponential gaps (fixed by the seed, so these cannot flake):
    # mean 1/rate = 10 ms (59 draws: well within 40%), coefficient of variation ~1.
    assert statistics.mean(gaps) == pytest.approx(0.010, rel=0.4)
    assert statistics.stdev(gaps) / statistics.mean(gaps) > 0.5
    # Request k reached the server no sooner than k scheduled gaps after the run began.
    arrived = stats(port)["arrived"]
    intended = list(itertools.accumulate(gaps, initial=0.0))
    assert [r.ok for r in results] == [True] * 60
    for k, (r, due) in enumerate(zip(results, intended, strict=True)):
        assert arrived[r.meta_info["id"]] >= before + due - TIMER_SLACK_S * k - FLOAT_SLACK_S, (k, load())


# asyncio may fire a timer up to its clock's resolution early (BaseEventLoop._clock_resolution).
TIMER_SLACK_S = time.get_clock_info("monotonic").resolution


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


def test_multi_token_chunks_split_the_gap_and_give_accept_length(sse_server, monkeypatch):
    port = sse_server("--tokens-per-chunk", "4", "--itl-ms", "2")
    probe = ClientProbe(monkeypatch)
    w = Workload(input_len=4, output_len=40, num_prompts=2, concurrency=1, warmup=0)
    m = rep0(run_workload("127.0.0.1", port, w))
    assert m["accept_length"] == pytest.approx(4.0)
    # a chunk of 4 tokens counts as 4 gaps of a quarter of the chunk's gap
    sends = {rec["id"]: rec["times"] for rec in stats(port)["sends"]}
    assert len(sends) == 2
    bounds = []
    for rid, sent in sends.items():
        assert len(sent) == 10
        itl = probe.results[rid].itl
        assert len(itl) == 36 and all(len(set(itl[i : i + 4])) == 1 for i in range(0, 36, 4))
        bounds += itl_bounds(sent, probe.parse_starts[rid], tokens_per_event=4)
    assert_within(m["median_itl_ms"], bounds, statistics.median)


def test_completions_api_streams_and_counts_usage(sse_server, monkeypatch):
    port = sse_server("--itl-ms", "2")
    probe = ClientProbe(monkeypatch)
    w = Workload(input_len=4, output_len=30, num_prompts=3, concurrency=3, api="completions", warmup=0)
    m = rep0(run_workload("127.0.0.1", port, w))
    assert m["completed"] == 3 and m["total_output_tokens"] == 90
    sends = {rec["id"]: rec["times"] for rec in stats(port)["sends"]}
    starts = probe.parse_starts
    assert sorted(sends) == sorted(starts) and len(sends) == 3
    bounds = [b for rid, sent in sends.items() for b in itl_bounds(sent, starts[rid])]
    assert len(bounds) == 3 * 29
    assert_within(m["median_itl_ms"], bounds, statistics.median)


def test_non_streaming_mode(sse_server):
    port = sse_server("--ttft-ms", "10", "--itl-ms", "1")
    w = Workload(input_len=4, output_len=11, num_prompts=2, stream=False, warmup=0)
    m = rep0(run_workload("127.0.0.1", port, w))
    assert m["completed"] == 2 and m["total_output_tokens"] == 22
    # the server answers no sooner than 10 + 10 * 1 ms after reading the request
    assert m["median_e2e_latency_ms"] >= 20
    assert m["median_ttft_ms"] == m["median_e2e_latency_ms"]  # no stream: first token = whole answer


def test_repetitions_give_ci_and_cv_and_goodput(sse_server):
    port = sse_server("--ttft-ms", "5", "--itl-ms", "1")
    slo = Slo(ttft_ms=3_600_000, tpot_ms=3_600_000)  # met at any load (misses: test_bench_stats.py)
    w = Workload(input_len=4, output_len=10, num_prompts=4, concurrency=2, repetitions=3, slo=slo)
    out = run_workload("127.0.0.1", port, w)
    assert out["n"] == 3 and len(out["repetitions"]) == 3
    lo, hi = out["ci95"]["output_throughput"]
    assert lo <= out["values"]["output_throughput"] <= hi
    assert out["cv"]["output_throughput"] >= 0
    assert out["values"]["goodput"] == pytest.approx(out["values"]["request_throughput"])
    assert out["workload"]["slo"] == {"ttft_ms": 3_600_000, "tpot_ms": 3_600_000}


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
