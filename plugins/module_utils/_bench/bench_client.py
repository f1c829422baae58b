# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Benchmark client for SGLang: asyncio and raw HTTP/1.1, standard library only.

Drives SGLang's native POST /generate with input_ids of the requested length (or, as an
option, /v1/completions), streaming, and measures with sglang.bench_serving's definitions
(see bench_stats). Two things make it cheaper and more exact than bench_serving:
  - every chunk is timestamped in data_received(), when its bytes arrive, before any
    parsing, so event-loop delays do not bunch tokens into short and long gaps;
  - the cumulative text of each chunk is never parsed: the token count is read with one
    regex at the end of the event, and only the final event is decoded as JSON.
Connections are kept alive and reused (one per in-flight request).
The HTTP client is http_stream's, the stream's parser sse_tokens'.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_stats import (
    RequestTiming,
    accept_length_from_server_info,
    aggregate,
    run_metrics,
)

# The workload definition lives in its own module (the planner reads it without asyncio);
# bench_client.Workload is that class.
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_workload import (
    Workload,
    workload_dict,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.capacity_search import (
    CapacitySearch,
    round_gaps,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.http_stream import HttpClient
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.sse_tokens import (
    ERROR_MAX,
    SseTokens,
    decode_event,
    error_text,
)

# Token ids for synthetic prompts: inside every real model's vocabulary, clear of special tokens.
DEFAULT_VOCAB = (1000, 30000)


@dataclass
class RequestResult(RequestTiming):
    """A request's timing plus what the gate and the accept-length figure need."""

    text: str | None = None
    finish_reason: Any = None
    meta_info: dict[str, Any] = field(default_factory=dict)


class BenchClient:
    """Benchmark client for one server. Keep one per server lifetime: it counts the tokens
    it generated, which the /server_info accept-length split needs."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 30000,
        *,
        api_key: str | None = None,
        model: str = "default",
        request_timeout_s: float = 3600.0,
        vocab: tuple[int, int] = DEFAULT_VOCAB,
    ) -> None:
        self.http = HttpClient(host, port, api_key=api_key, timeout_s=request_timeout_s)
        self.model = model
        self.vocab = vocab
        self.tokens_generated = 0  # by this client, since it was made

    def __repr__(self) -> str:
        return f"BenchClient({self.http.host}:{self.http.port})"

    # -- building requests (done before the clock starts)

    def prompt_ids(self, rng: random.Random, n: int) -> list[int]:
        return rng.choices(range(*self.vocab), k=n)

    def generate_request(
        self,
        prompt: list[int] | str,
        max_new_tokens: int,
        *,
        stream: bool = True,
        ignore_eos: bool = True,
        temperature: float = 0.0,
    ) -> bytes:
        payload = {
            ("text" if isinstance(prompt, str) else "input_ids"): prompt,
            "sampling_params": {
                "temperature": temperature,
                "max_new_tokens": max_new_tokens,
                "ignore_eos": ignore_eos,
            },
            "stream": stream,
        }
        return self.http.request_bytes("POST", "/generate", json.dumps(payload).encode())

    def completions_request(
        self, prompt: list[int] | str, max_new_tokens: int, *, stream: bool = True, ignore_eos: bool = True
    ) -> bytes:
        payload: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": max_new_tokens,
            "temperature": 0.0,
            "ignore_eos": ignore_eos,
            "stream": stream,
        }
        if stream:
            payload["stream_options"] = {"include_usage": True}
        return self.http.request_bytes("POST", "/v1/completions", json.dumps(payload).encode())

    # -- one request

    async def request(
        self, raw: bytes, prompt_len: int, api: str = "generate", stream: bool = True
    ) -> RequestResult:
        """Send one prepared request and measure it. Never raises for server-side errors."""
        result = RequestResult(ok=False, prompt_len=prompt_len)
        sse = SseTokens(api) if stream else None
        st = time.perf_counter()
        result.start = st
        try:
            resp = await self.http.send(raw, sse.feed if sse else None)
        except (OSError, asyncio.TimeoutError) as exc:
            result.error = f"{type(exc).__name__}: {exc}"[:ERROR_MAX]
            return result
        end = time.perf_counter()
        if resp.status != 200:
            result.error = f"HTTP {resp.status}: {error_text(resp.body)}"
            return result
        if sse is None:
            obj = json.loads(bytes(resp.body))
            final = obj[0] if isinstance(obj, list) else obj
            self._finish_from_final(result, final, api)
            result.ttft = result.latency = end - st
            result.ok = True
            self.tokens_generated += result.output_len
            return result
        final = decode_event(sse.last) if sse.last else {}
        if "error" in final or not sse.times:
            result.error = error_text(sse.last) if sse.last else "stream ended without a token"
            return result
        self._finish_from_final(result, final, api)
        if result.output_len == 0:
            result.output_len = sse.count or len(sse.times)
        # Latency: last event processed ([DONE] if sent), as bench_serving measures it.
        result.latency = end - st
        result.ttft = sse.times[0] - st
        itl = result.itl
        prev_t, prev_n = sse.times[0], sse.counts[0]
        for t, n in zip(sse.times[1:], sse.counts[1:], strict=True):
            k = n - prev_n
            gap = (t - prev_t) / k
            itl.extend([gap] * k)
            prev_t, prev_n = t, n
        result.ok = True
        self.tokens_generated += result.output_len
        return result

    @staticmethod
    def _finish_from_final(result: RequestResult, final: dict[str, Any], api: str) -> None:
        if api == "generate":
            meta = final.get("meta_info") or {}
            result.meta_info = meta
            result.text = final.get("text")
            result.output_len = int(meta.get("completion_tokens") or 0)
            result.finish_reason = meta.get("finish_reason")
            vc = meta.get("spec_verify_ct")
            result.spec_verify_ct = int(vc) if vc else None
        else:
            usage = final.get("usage") or {}
            result.output_len = int(usage.get("completion_tokens") or 0)
            choices = final.get("choices") or [{}]
            result.text = choices[0].get("text")
            result.finish_reason = choices[0].get("finish_reason")

    async def generate_text(
        self, prompt: str, max_new_tokens: int, temperature: float = 0.0, timeout_s: float = 300.0
    ) -> tuple[bool, str, dict[str, Any]]:
        """Non-streaming greedy /generate for a text prompt: (ok, text or error, meta_info)."""
        payload = {
            "text": prompt,
            "sampling_params": {"temperature": temperature, "max_new_tokens": max_new_tokens},
        }
        try:
            status, obj = await self.http.post_json("/generate", payload, timeout_s=timeout_s)
        except (OSError, asyncio.TimeoutError) as exc:
            return False, f"{type(exc).__name__}: {exc}", {}
        if status != 200 or not isinstance(obj, dict):
            err = obj if isinstance(obj, str) else json.dumps(obj)
            return False, f"HTTP {status}: {error_text(err.encode())}", {}
        meta = obj.get("meta_info") or {}
        self.tokens_generated += int(meta.get("completion_tokens") or 0)
        return True, str(obj.get("text") or ""), meta

    async def server_accept_length(self) -> float | None:
        """Mean avg_spec_accept_length over /server_info internal_states (cumulative since start)."""
        for path in ("/server_info", "/get_server_info"):
            try:
                status, obj = await self.http.get_json(path)
            except (OSError, asyncio.TimeoutError):
                return None
            if status == 404:
                continue
            if status != 200 or not isinstance(obj, dict):
                return None
            vals = [
                float(s["avg_spec_accept_length"])
                for s in obj.get("internal_states") or []
                if isinstance(s, dict) and isinstance(s.get("avg_spec_accept_length"), (int, float))
            ]
            return sum(vals) / len(vals) if vals else None
        return None

    # -- a workload

    def _prepare(self, w: Workload, rep: int, n: int, output_len: int) -> list[tuple[bytes, int]]:
        rng = random.Random(f"{w.seed}/{w.name}/{rep}")  # fresh ids per repetition: no prefix-cache hits
        out = []
        for _i in range(n):
            ids = self.prompt_ids(rng, w.input_len)
            if w.api == "generate":
                raw = self.generate_request(ids, output_len, stream=w.stream)
            else:
                raw = self.completions_request(ids, output_len, stream=w.stream)
            out.append((raw, w.input_len))
        return out

    async def _drive(
        self, w: Workload, reqs: list[tuple[bytes, int]], seed: str, gaps: list[float] | None = None
    ) -> list[RequestResult]:
        results: list[RequestResult | None] = [None] * len(reqs)
        sem = asyncio.Semaphore(w.concurrency) if w.concurrency else None

        async def one(i: int) -> None:
            raw, plen = reqs[i]
            if sem is None:
                results[i] = await self.request(raw, plen, w.api, w.stream)
                return
            async with sem:
                results[i] = await self.request(raw, plen, w.api, w.stream)

        if w.request_rate is None and sem is not None:
            # Closed loop: `concurrency` workers, each sending its next request when one finishes.
            queue = iter(range(len(reqs)))

            async def worker() -> None:
                for i in queue:
                    raw, plen = reqs[i]
                    results[i] = await self.request(raw, plen, w.api, w.stream)

            await asyncio.gather(*(worker() for _i in range(min(w.concurrency or 1, len(reqs)))))
        else:
            # Open loop: Poisson arrivals (seeded), capped by concurrency when given.
            # `gaps`, when given, are the send-time gaps (a capacity round's), kept on an
            # absolute schedule: a late send does not push back the ones after it.
            rng = random.Random(f"{seed}/arrivals")
            tasks = []
            t0 = time.perf_counter()
            due = 0.0
            for i in range(len(reqs)):
                tasks.append(asyncio.ensure_future(one(i)))
                if gaps is not None and i < len(gaps):
                    due += gaps[i]
                    await asyncio.sleep(max(0.0, t0 + due - time.perf_counter()))
                elif gaps is None and w.request_rate is not None and i + 1 < len(reqs):
                    await asyncio.sleep(rng.expovariate(w.request_rate))
            await asyncio.gather(*tasks)
        return [r for r in results if r is not None]

    async def run_repetition(
        self, w: Workload, rep: int, gaps: list[float] | None = None
    ) -> tuple[list[RequestResult], float]:
        """One measured pass of a workload: (per-request results, duration in seconds)."""
        reqs = self._prepare(w, rep, w.num_prompts, w.output_len)
        t0 = time.perf_counter()
        results = await self._drive(w, reqs, f"{w.seed}/{w.name}/{rep}", gaps)
        return results, time.perf_counter() - t0

    async def run(self, w: Workload, output_samples: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Warm up, run every repetition, return the results file's per-workload metrics.

        `output_samples`, when given, receives a sample of each repetition's own requests
        (sample_outputs): what the correctness gate checks under load."""
        if w.warmup:
            warm = self._prepare(w, -1, w.warmup, min(w.output_len, 16))
            wl = Workload(name=w.name, input_len=w.input_len, output_len=w.output_len, num_prompts=w.warmup,
                          concurrency=w.concurrency or w.warmup, api=w.api, stream=w.stream)  # fmt: skip
            await self._drive(wl, warm, "warmup")
        if w.capacity is not None:
            return await self.run_capacity(w, output_samples)
        reps = []
        for rep in range(w.repetitions):
            before = await self.server_accept_length()
            tokens_before = self.tokens_generated
            results, duration = await self.run_repetition(w, rep)
            if output_samples is not None:
                output_samples.extend(sample_outputs(w, rep, results))
            m = run_metrics(results, duration, w.slo)
            if m["accept_length"] is None:
                after = await self.server_accept_length()
                run_tokens = self.tokens_generated - tokens_before
                m["accept_length"] = accept_length_from_server_info(before, after, tokens_before, run_tokens)
            errors = sorted({r.error for r in results if not r.ok})
            if errors:
                m["errors"] = errors[:5]
            reps.append(m)
        out = aggregate(reps)
        out["workload"] = workload_dict(w)
        return out

    async def run_capacity(
        self, w: Workload, output_samples: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """A capacity search on the warm server (capacity_search): open-loop rounds of
        w.num_prompts Poisson arrivals, one rate per round. The metrics block: values and
        its one repetition hold `capacity` (requests/s) and the last passing round's
        metrics (all zero-valued when none passed); `capacity` holds the search."""
        if w.capacity is None:
            raise ValueError("run_capacity needs a capacity workload")
        search = CapacitySearch(w.capacity)
        passing: dict[str, Any] = {}
        while (rate := search.next_load()) is not None:
            rw = dataclasses.replace(w, request_rate=rate)
            rep = len(search.rounds)
            rng = random.Random(f"{w.seed}/{w.name}/{rep}/arrivals")
            gaps = round_gaps(rate, w.num_prompts, rng)
            before = await self.server_accept_length()
            tokens_before = self.tokens_generated
            results, duration = await self.run_repetition(rw, rep, gaps)
            if output_samples is not None:
                output_samples.extend(sample_outputs(w, rep, results))
            m = run_metrics(results, duration, w.slo)
            if m["accept_length"] is None:  # not in the answers (/v1/completions): the server's split
                after = await self.server_accept_length()
                run_tokens = self.tokens_generated - tokens_before
                m["accept_length"] = accept_length_from_server_info(before, after, tokens_before, run_tokens)
            if search.record(rate, m) and rate == search.last_passing:
                passing = m
            starts = sorted(r.start for r in results)
            if len(starts) > 1 and starts[-1] > starts[0]:
                # The rate the round was sent at: below `load` when the client fell behind.
                search.rounds[-1]["sent_rate"] = (len(starts) - 1) / (starts[-1] - starts[0])
            errors = sorted({r.error for r in results if not r.ok})
            if errors:
                search.rounds[-1]["errors"] = errors[:5]
        result = search.result()
        rep_values = {k: v for k, v in passing.items() if v is None or isinstance(v, (int, float))}
        rep_values = {k: v for k, v in rep_values.items() if not isinstance(v, bool)}
        rep_values["capacity"] = result["value"]
        out = aggregate([rep_values])
        out["capacity"] = result
        out["workload"] = workload_dict(w)
        return out

    def close(self) -> None:
        self.http.close()


# Requests per repetition whose outputs the gate checks under load: spread over the run, so
# the sample holds requests served in the fullest batches as well as the first and last.
SAMPLES_PER_REPETITION = 8
TEXT_SAMPLE_CHARS = 256


def sample_outputs(w: Workload, rep: int, results: list[RequestResult]) -> list[dict[str, Any]]:
    """Up to SAMPLES_PER_REPETITION of a repetition's requests, evenly spaced by request index
    (the same indices, hence the same prompts, for every config): {workload, rep, index,
    greedy, ok, text (None where the API does not return it), output_len, error}."""
    n = len(results)
    if n == 0:
        return []
    # A streamed /v1/completions answer ends with a chunk that holds only its last piece.
    full_text = w.api == "generate" or not w.stream
    k = min(n, SAMPLES_PER_REPETITION)
    picked = sorted({round(i * (n - 1) / max(1, k - 1)) for i in range(k)})
    out = []
    for i in picked:
        r = results[i]
        text = r.text[:TEXT_SAMPLE_CHARS] if r.text is not None and full_text else None
        out.append(
            {
                "workload": w.name,
                "rep": rep,
                "index": i,
                "greedy": True,  # the client sends temperature 0 (generate_request, completions_request)
                "ok": r.ok,
                "text": text,
                "output_len": r.output_len,
                "error": r.error,
            }
        )
    return out


def run_workload(
    host: str,
    port: int,
    workload: Workload,
    *,
    api_key: str | None = None,
    output_samples: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Synchronous convenience: run one workload against a server with a fresh client."""

    async def main() -> dict[str, Any]:
        client = BenchClient(host, port, api_key=api_key)
        try:
            return await client.run(workload, output_samples)
        finally:
            client.close()

    return asyncio.run(main())
