"""A small HTTP/1.1 server on asyncio streams: keep-alive, Content-Length and chunked
request bodies, and chunked streaming responses for server-sent events.

Hand-written because the stand-in must stream thousands of tokens a second from one core
with its own overhead well below the simulated timing; a framework's per-chunk cost is
the budget. Only what SGLang's HTTP surface needs is here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
_DRAIN_ABOVE = 256 * 1024


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Request:
    __slots__ = ("body", "headers", "method", "path", "query")

    def __init__(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        parts = urlsplit(target)
        self.method = method
        self.path = parts.path
        self.query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        if not self.body:
            return {}
        try:
            return json.loads(self.body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise HttpError(400, f"request body is not valid JSON: {exc}") from exc


class Response:
    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(
        self,
        status: int = 200,
        body: bytes | str = b"",
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.body = body.encode() if isinstance(body, str) else body
        self.content_type = content_type
        self.headers = headers or {}


def json_response(data: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(data, separators=(",", ":")))


def _status_line(status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"HTTP/1.1 {status} {phrase}\r\n"


class Stream:
    """A chunked response written piece by piece (server-sent events)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.started = False

    @property
    def closed(self) -> bool:
        return self._writer.is_closing()

    def start(self, status: int = 200, content_type: str = "text/event-stream") -> None:
        self.started = True
        self._writer.write(
            (
                _status_line(status) + f"Content-Type: {content_type}\r\nCache-Control: no-cache\r\n"
                "Transfer-Encoding: chunked\r\n\r\n"
            ).encode()
        )

    def send(self, data: bytes) -> None:
        if data:
            self._writer.write(b"%x\r\n%b\r\n" % (len(data), data))

    async def flush(self) -> None:
        transport = self._writer.transport
        if transport.get_write_buffer_size() > _DRAIN_ABOVE:
            await self._writer.drain()

    def end(self) -> None:
        self._writer.write(b"0\r\n\r\n")


Handler = Callable[[Request, Stream], Awaitable["Response | None"]]


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip(), 16)
        except ValueError as exc:
            raise HttpError(400, "bad chunk size") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)
        if len(body) > MAX_BODY:
            raise HttpError(413, "request body too large")


def _write_response(writer: asyncio.StreamWriter, resp: Response, keep_alive: bool) -> None:
    head = (
        _status_line(resp.status)
        + f"Content-Type: {resp.content_type}\r\nContent-Length: {len(resp.body)}\r\n"
    )
    for name, value in resp.headers.items():
        head += f"{name}: {value}\r\n"
    if not keep_alive:
        head += "Connection: close\r\n"
    writer.write(head.encode() + b"\r\n" + resp.body)


async def serve_connection(
    handler: Handler, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return
            lines = head.decode("latin-1").split("\r\n")
            try:
                method, target, version = lines[0].split(" ", 2)
            except ValueError:
                _write_response(writer, json_response({"error": "bad request line"}, 400), False)
                return
            headers: dict[str, str] = {}
            for line in lines[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            connection = headers.get("connection", "").lower()
            keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
            try:
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    body = await _read_chunked(reader)
                else:
                    length = int(headers.get("content-length", "0") or 0)
                    if length > MAX_BODY:
                        raise HttpError(413, "request body too large")
                    body = await reader.readexactly(length) if length else b""
                if headers.get("expect", "").lower() == "100-continue":
                    pass  # body already read; clients that wait for 100 time out and send anyway
                request = Request(method, target, headers, body)
                stream = Stream(writer)
                resp = await handler(request, stream)
            except HttpError as err:
                resp, stream = json_response({"error": {"message": str(err)}}, err.status), Stream(writer)
            if resp is not None:
                _write_response(writer, resp, keep_alive)
            elif not stream.started:
                _write_response(writer, Response(500, b""), False)
                return
            await writer.drain()
            if not keep_alive or writer.is_closing():
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


async def start(handler: Handler, host: str, port: int) -> asyncio.AbstractServer:
    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(handler, reader, writer)

    return await asyncio.start_server(on_client, host, port, limit=MAX_HEAD, reuse_address=True, backlog=1024)
