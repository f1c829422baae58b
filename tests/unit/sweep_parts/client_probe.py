"""Bounds on the benchmark client's timestamps, measured in the run they judge.

The client stamps each streamed token with the time its bytes were received, before any
parsing. On one machine that time is bracketed by two things we can record:
  - below: when sse_server.py handed the event to its socket (its `sends`, recorded just
    before the write; perf_counter is CLOCK_MONOTONIC, shared by both processes);
  - above: when the client began parsing the bytes that carried it (ParseStarts wraps
    _Response.feed, where HTTP de-chunking and then the SSE consumer run).
A loaded machine widens the bracket (a token waits in the socket until the client runs)
but cannot break it; a client that stamps a token while or after parsing it lands above it.
So every check built on these bounds is exact, with no allowance for machine speed.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_client import (
    BenchClient,
    RequestResult,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.http_stream import _Response
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.sse_tokens import SseTokens

# Sums and differences of perf_counter floats (~1e5 s) round at ~1e-11 s: far below any
# real effect, yet enough to tell `t - s >= 0` from a rounding of it.
FLOAT_SLACK_S = 1e-9


def request_id(sse: SseTokens) -> str:
    """sse_server.py puts the request's id in every event (meta_info.id, or id)."""
    final = json.loads(sse.last)
    return str((final.get("meta_info") or {}).get("id") or final["id"])


class ClientProbe:
    """Installed on the client's classes for one test (monkeypatch undoes it).

    parse_starts[id]: per token, when the client began parsing the bytes it came in.
    spans[id]: (entered, returned) perf_counter around BenchClient.request, so
    entered <= the client's own start stamp and returned >= its end stamp.
    results[id]: what BenchClient.request returned.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._streams: dict[int, tuple[SseTokens, list[float]]] = {}
        self.spans: dict[str, tuple[float, float]] = {}
        self.results: dict[str, RequestResult] = {}
        feed, request = _Response.feed, BenchClient.request

        def probed_feed(resp: _Response, data: bytes, now: float) -> None:
            entered = time.perf_counter()
            while time.perf_counter() == entered:  # whatever the parser stamps is strictly later
                pass
            sse = getattr(resp.on_body, "__self__", None)
            before = len(sse.times) if isinstance(sse, SseTokens) else 0
            feed(resp, data, now)
            if isinstance(sse, SseTokens) and len(sse.times) > before:
                starts = self._streams.setdefault(id(sse), (sse, []))[1]
                starts.extend([entered] * (len(sse.times) - before))

        async def probed_request(client: BenchClient, *args: Any, **kwargs: Any) -> RequestResult:
            entered = time.perf_counter()
            result = await request(client, *args, **kwargs)
            returned = time.perf_counter()
            rid = str(result.meta_info.get("id", f"unnamed-{len(self.spans)}"))
            self.spans[rid], self.results[rid] = (entered, returned), result
            return result

        monkeypatch.setattr(_Response, "feed", probed_feed)
        monkeypatch.setattr(BenchClient, "request", probed_request)

    @property
    def parse_starts(self) -> dict[str, list[float]]:
        return {request_id(sse): starts for sse, starts in self._streams.values()}

    @property
    def token_times(self) -> dict[str, list[float]]:
        """The client's own arrival stamps per token event (what its ITLs are computed from)."""
        return {request_id(sse): list(sse.times) for sse, _starts in self._streams.values()}


def itl_bounds(
    sent: list[float], parsed: list[float], tokens_per_event: int = 1
) -> list[tuple[float, float]]:
    """Per ITL value the client can report, the interval the run allows: the gap between
    events i-1 and i, seen at times in [sent, parsed] each, split over its tokens."""
    k = tokens_per_event
    return [
        ((sent[i] - parsed[i - 1]) / k, (parsed[i] - sent[i - 1]) / k)
        for i in range(1, len(sent))
        for _token in range(k)
    ]
