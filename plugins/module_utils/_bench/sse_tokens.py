# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A streamed (SSE) answer read for its tokens' arrival times, and the error text of a refused request."""

from __future__ import annotations

import json
import re
from typing import Any

# The workload definition lives in its own module (the planner reads it without asyncio);
# bench_client.Workload is that class.

_COMPLETION_TOKENS = re.compile(rb'"completion_tokens":\s*(\d+)')
_NONEMPTY_TEXT = re.compile(rb'"text":\s*"[^"]')
ERROR_MAX = 500


class SseTokens:
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


def decode_event(payload: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(payload)
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


def error_text(body: bytes | bytearray) -> str:
    text = bytes(body).decode("utf-8", "replace").strip()
    try:
        obj = json.loads(text)
    except ValueError:
        return text[:ERROR_MAX]
    if isinstance(obj, dict):
        err = obj.get("error", obj.get("message", obj.get("detail", obj)))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:ERROR_MAX]
    return text[:ERROR_MAX]
