# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark client for SGLang: asyncio and raw HTTP/1.1, standard library only.

Drives SGLang's native POST /generate with input_ids of the requested length (or, as an
option, /v1/completions), streaming, and measures with sglang.bench_serving's definitions
(see bench_stats). Two things make it cheaper and more exact than bench_serving:
  - every chunk is timestamped in data_received(), when its bytes arrive, before any
    parsing, so event-loop delays do not bunch tokens into short and long gaps;
  - the cumulative text of each chunk is never parsed: the token count is read with one
    regex at the end of the event, and only the final event is decoded as JSON.
Connections are kept alive and reused (one per in-flight request).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import random
import re
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ansible_collections.bwtune.sglang.plugins.module_utils.bench_stats import (
    RequestTiming,
    accept_length_from_server_info,
    aggregate,
    run_metrics,
)

# The workload definition lives in its own module (the planner reads it without asyncio);
# bench_client.Workload is that class.
from ansible_collections.bwtune.sglang.plugins.module_utils.bench_workload import Workload, workload_dict

# Token ids for synthetic prompts: inside every real model's vocabulary, clear of special tokens.
DEFAULT_VOCAB = (1000, 30000)
_COMPLETION_TOKENS = re.compile(rb'"completion_tokens":\s*(\d+)')
_NONEMPTY_TEXT = re.compile(rb'"text":\s*"[^"]')
_ERROR_MAX = 500


@dataclass
class RequestResult(RequestTiming):
    """A request's timing plus what the gate and the accept-length figure need."""

    text: str | None = None
    finish_reason: Any = None
    meta_info: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- HTTP/1.1 over asyncio


class _Response:
    """Incremental HTTP/1.1 response parser; body bytes go to on_body(data, arrival_time)."""

    __slots__ = (
        "_buf",
        "_chunk_left",
        "_mode",
        "_remaining",
        "body",
        "done",
        "keep_alive",
        "on_body",
        "status",
    )

    def __init__(self, on_body: Callable[[bytes, float], None] | None, done: asyncio.Future[None]) -> None:
        self.on_body = on_body
        self.done = done
        self.status = 0
        self.keep_alive = True
        self.body = bytearray()  # kept only when there is no on_body consumer (or on error)
        self._buf = b""
        self._mode = "head"  # head | length | chunked | close | end
        self._remaining = 0
        self._chunk_left = -1  # -1: expecting a chunk-size line

    def _emit(self, data: bytes, now: float) -> None:
        if self.on_body is not None and self.status == 200:
            self.on_body(data, now)
        else:
            self.body += data

    def feed(self, data: bytes, now: float) -> None:
        if self._mode == "head":
            data = self._buf + data
            end = data.find(b"\r\n\r\n")
            if end < 0:
                self._buf = data
                return
            self._buf = b""
            self._parse_head(data[:end].decode("latin-1"))
            data = data[end + 4 :]
        if self._mode == "chunked":
            self._feed_chunked(data, now)
        elif self._mode == "length":
            part = data[: self._remaining]
            self._remaining -= len(part)
            if part:
                self._emit(part, now)
            if self._remaining <= 0:
                self._finish()
        elif self._mode == "close" and data:
            self._emit(data, now)

    def _parse_head(self, head: str) -> None:
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        headers = {}
        for line in lines[1:]:
            k, _sep, v = line.partition(":")
            headers[k.strip().lower()] = v.strip().lower()
        if headers.get("connection") == "close" or parts[0] == "HTTP/1.0":
            self.keep_alive = False
        if "chunked" in headers.get("transfer-encoding", ""):
            self._mode = "chunked"
        elif "content-length" in headers:
            self._mode = "length"
            self._remaining = int(headers["content-length"])
            if self._remaining == 0:
                self._finish()
        else:
            self._mode = "close"
            self.keep_alive = False

    def _feed_chunked(self, data: bytes, now: float) -> None:
        if not self._buf and self._chunk_left == -1:
            # The usual recv while streaming: exactly one whole chunk (one SSE event).
            eol = data.find(b"\r\n")
            try:
                size = int(data[:eol], 16) if 0 < eol <= 8 else 0
            except ValueError:  # a chunk extension or garbage: the general path decides
                size = 0
            if size:
                end = eol + 2 + size
                if len(data) == end + 2 and data.endswith(b"\r\n"):
                    self._emit(data[eol + 2 : end], now)
                    return
        buf = self._buf + data if self._buf else data
        pos = 0
        n = len(buf)
        out: list[bytes] = []
        while pos < n and self._mode == "chunked":
            if self._chunk_left == -1:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(buf[pos:eol].split(b";", 1)[0], 16)
                pos = eol + 2
                if size == 0:
                    self._chunk_left = -2  # last chunk: wait for the empty trailer line
                else:
                    self._chunk_left = size
            if self._chunk_left == -2:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                if eol == pos:
                    pos += 2
                    self._mode = "end"
                else:
                    pos = eol + 2  # a trailer header: skip it
                continue
            take = min(self._chunk_left, n - pos)
            if take:
                out.append(buf[pos : pos + take])
                pos += take
                self._chunk_left -= take
            if self._chunk_left == 0:
                if n - pos < 2:
                    break
                pos += 2  # CRLF after chunk data
                self._chunk_left = -1
            elif take == 0:
                break
        # Keep an unconsumed tail; a chunk with 0 bytes left but no CRLF yet waits here too.
        self._buf = buf[pos:] if pos < n else b""
        if out:
            self._emit(out[0] if len(out) == 1 else b"".join(out), now)
        if self._mode == "end":
            self._finish()

    def _finish(self) -> None:
        self._mode = "end"
        if not self.done.done():
            self.done.set_result(None)

    def eof(self, exc: BaseException | None) -> None:
        if self._mode == "close":
            self._finish()
        elif not self.done.done():
            self.done.set_exception(ConnectionError(f"connection closed mid-response ({exc or 'EOF'})"))


class _Connection:
    """One keep-alive connection: a non-blocking socket read by its own event-loop reader.

    The reader receives into one preallocated buffer and hands the bytes straight to the
    response parser, timestamped when recv_into() returns, before any parsing. (asyncio's
    transports add several Python calls per recv on top; a plain Protocol even allocates a
    256 KiB bytes object per recv. Per streamed token, that was most of this client's CPU.)"""

    __slots__ = ("_buf", "_fd", "_loop", "_view", "closed", "response", "sock")

    _BUF_SIZE = 65536

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self._loop = loop
        self.sock = sock
        self._fd = sock.fileno()
        self.response: _Response | None = None
        self.closed = False
        self._buf = bytearray(self._BUF_SIZE)
        self._view = memoryview(self._buf)
        loop.add_reader(self._fd, self._readable)

    def _readable(self) -> None:
        try:
            n = self.sock.recv_into(self._buf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        now = time.perf_counter()  # arrival time: taken before any parsing
        if not n:
            self._lost(None)
            return
        resp = self.response
        if resp is None:
            self.close()  # bytes nobody asked for: this connection cannot be reused
            return
        try:
            resp.feed(self._view[:n].tobytes(), now)
        except Exception as exc:  # a malformed response must fail the request, not the loop
            self.close()
            if not resp.done.done():
                resp.done.set_exception(ConnectionError(f"bad HTTP response: {exc}"))

    def _lost(self, exc: Exception | None) -> None:
        self.close()
        if self.response is not None:
            self.response.eof(exc)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._loop.remove_reader(self._fd)
            self.sock.close()


async def _connect(host: str, port: int) -> _Connection:
    loop = asyncio.get_running_loop()
    try:
        ipaddress.ip_address(host)
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)  # a literal: no lookup
    except ValueError:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    error: OSError = ConnectionError(f"no address for {host}:{port}")
    for family, kind, proto, _name, addr in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, addr)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:
            sock.close()
            raise
        return _Connection(loop, sock)
    raise error


class HttpClient:
    """Keep-alive HTTP/1.1 client for one server; safe for many concurrent requests."""

    def __init__(self, host: str, port: int, api_key: str | None = None, timeout_s: float = 3600.0) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._idle: list[_Connection] = []
        auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        self._fixed_headers = f"Host: {host}:{port}\r\n{auth}".encode("latin-1")

    def __repr__(self) -> str:  # never shows the API key
        return f"HttpClient({self.host}:{self.port})"

    async def _acquire(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return await _connect(self.host, self.port)

    def request_bytes(self, method: str, path: str, body: bytes | None = None) -> bytes:
        head = f"{method} {path} HTTP/1.1\r\n".encode("latin-1") + self._fixed_headers
        if body is None:
            return head + b"\r\n"
        return head + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body

    async def send(
        self,
        raw: bytes,
        on_body: Callable[[bytes, float], None] | None = None,
        timeout_s: float | None = None,
    ) -> _Response:
        """Send a prepared request; return the finished response (status, body if not consumed)."""
        conn = await self._acquire()
        loop = asyncio.get_running_loop()
        resp = _Response(on_body, loop.create_future())
        conn.response = resp
        try:
            await loop.sock_sendall(conn.sock, raw)
            await asyncio.wait_for(resp.done, timeout_s or self.timeout_s)
        except BaseException:
            conn.close()
            raise
        conn.response = None
        if resp.keep_alive and not conn.closed:
            self._idle.append(conn)
        else:
            conn.close()
        return resp

    async def get_json(self, path: str, timeout_s: float = 30.0) -> tuple[int, Any]:
        resp = await self.send(self.request_bytes("GET", path), timeout_s=timeout_s)
        try:
            return resp.status, json.loads(bytes(resp.body) or b"null")
        except ValueError:
            return resp.status, bytes(resp.body).decode("utf-8", "replace")

    async def post_json(self, path: str, payload: Any, timeout_s: float | None = None) -> tuple[int, Any]:
        body = json.dumps(payload).encode()
        resp = await self.send(self.request_bytes("POST", path, body), timeout_s=timeout_s)
        try:
            return resp.status, json.loads(bytes(resp.body) or b"null")
        except ValueError:
            return resp.status, bytes(resp.body).decode("utf-8", "replace")

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()


# ---------------------------------------------------------------- streamed responses


class _SseTokens:
    """Consumes an SSE body; records the arrival time of each token-bearing event.

    For /generate the events carry a cumulative meta_info.completion_tokens: per event only
    its position is found (bytes.rfind from the end, where meta_info sits) and the number
    read with one anchored regex; nothing is copied or decoded until the stream ends, when
    the last event is decoded as JSON. For /v1/completions each event with non-empty text
    counts as one chunk and the token count comes from the final usage event.
    """

    __slots__ = ("_last", "_partial", "api", "count", "counts", "done", "times")

    def __init__(self, api: str) -> None:
        self.api = api
        self._partial = b""
        self.times: list[float] = []
        self.counts: list[int] = []  # cumulative tokens at each arrival
        self.count = 0
        self._last: tuple[bytes, int, int] | None = None  # (buffer, start, end) of the final event
        self.done = False

    @property
    def last(self) -> bytes:
        """The last event that carried a token count (or, failing that, any event's payload)."""
        if self._last is None:
            return b""
        buf, start, end = self._last
        return buf[start:end].strip()

    def feed(self, data: bytes, now: float) -> None:
        buf = self._partial + data if self._partial else data
        if self.api != "generate":
            self._feed_events(buf, now)
            return
        find = buf.find
        start = 0
        count = self.count
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            if buf.startswith(b"data:", start):
                p = start + 5
                if buf.startswith(b" ", p):
                    p += 1
                if buf.startswith(b"[DONE]", p):
                    self.done = True
                else:
                    i = buf.rfind(b'"completion_tokens"', p, nl)
                    if i >= 0:
                        m = _COMPLETION_TOKENS.match(buf, i, nl)
                        if m:
                            n = int(m.group(1))
                            if n > count:
                                self.times.append(now)
                                self.counts.append(n)
                                count = n
                    self._last = (buf, p, nl)
            start = nl + 1
        self.count = count
        self._partial = buf[start:]

    def _feed_events(self, buf: bytes, now: float) -> None:
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            if buf.startswith(b"data:", start):
                self._completions_event(buf[start + 5 : nl].strip(), now)
            start = nl + 1
        self._partial = buf[start:]

    def _completions_event(self, payload: bytes, now: float) -> None:
        if payload == b"[DONE]":
            self.done = True
            return
        if _NONEMPTY_TEXT.search(payload):
            self.times.append(now)
            self.counts.append(len(self.times))
        # The count sits in usage, near the end: search backwards from there.
        i = payload.rfind(b'"completion_tokens"')
        if i >= 0:
            m = _COMPLETION_TOKENS.match(payload, i)
            if m:
                self.count = int(m.group(1))
            self._last = (payload, 0, len(payload))
        elif self._last is None:
            self._last = (payload, 0, len(payload))


def _decode_event(payload: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(payload)
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


def _error_text(body: bytes | bytearray) -> str:
    text = bytes(body).decode("utf-8", "replace").strip()
    try:
        obj = json.loads(text)
    except ValueError:
        return text[:_ERROR_MAX]
    if isinstance(obj, dict):
        err = obj.get("error", obj.get("message", obj.get("detail", obj)))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:_ERROR_MAX]
    return text[:_ERROR_MAX]


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
        sse = _SseTokens(api) if stream else None
        st = time.perf_counter()
        result.start = st
        try:
            resp = await self.http.send(raw, sse.feed if sse else None)
        except (OSError, asyncio.TimeoutError) as exc:
            result.error = f"{type(exc).__name__}: {exc}"[:_ERROR_MAX]
            return result
        end = time.perf_counter()
        if resp.status != 200:
            result.error = f"HTTP {resp.status}: {_error_text(resp.body)}"
            return result
        if sse is None:
            obj = json.loads(bytes(resp.body))
            final = obj[0] if isinstance(obj, list) else obj
            self._finish_from_final(result, final, api)
            result.ttft = result.latency = end - st
            result.ok = True
            self.tokens_generated += result.output_len
            return result
        final = _decode_event(sse.last) if sse.last else {}
        if "error" in final or not sse.times:
            result.error = _error_text(sse.last) if sse.last else "stream ended without a token"
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
            return False, f"HTTP {status}: {_error_text(err.encode())}", {}
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

    async def _drive(self, w: Workload, reqs: list[tuple[bytes, int]], seed: str) -> list[RequestResult]:
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
            rng = random.Random(f"{seed}/arrivals")
            tasks = []
            for i in range(len(reqs)):
                tasks.append(asyncio.ensure_future(one(i)))
                if w.request_rate is not None and i + 1 < len(reqs):
                    await asyncio.sleep(rng.expovariate(w.request_rate))
            await asyncio.gather(*tasks)
        return [r for r in results if r is not None]

    async def run_repetition(self, w: Workload, rep: int) -> tuple[list[RequestResult], float]:
        """One measured pass of a workload: (per-request results, duration in seconds)."""
        reqs = self._prepare(w, rep, w.num_prompts, w.output_len)
        t0 = time.perf_counter()
        results = await self._drive(w, reqs, f"{w.seed}/{w.name}/{rep}")
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
