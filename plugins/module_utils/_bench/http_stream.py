# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""HTTP/1.1 over asyncio for the benchmark client: kept-alive connections, every chunk stamped on arrival."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import time
from collections.abc import Callable
from typing import Any

# The workload definition lives in its own module (the planner reads it without asyncio);
# bench_client.Workload is that class.


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
