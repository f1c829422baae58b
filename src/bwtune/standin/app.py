"""SGLang's HTTP surface, served from the simulated engine.

Paths, methods, JSON shapes and auth follow SGLang 0.5.23 (srt/entrypoints/http_server.py,
srt/managers/tokenizer_manager.py, srt/entrypoints/openai/protocol.py, srt/utils/auth.py).
Everything that reports numbers also says they are simulated. The routes are grouped by
idea: `info_routes` (health, info, metrics), `native_routes` (`/generate`), `openai_routes`
(`/v1/...`); the server's state and one request's generation are `generation`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from bwtune.standin.generation import SIMULATED_NOTE, ServerState, crash_now
from bwtune.standin.httpserver import Request, Response, Stream, json_response
from bwtune.standin.info_routes import InfoRoutes
from bwtune.standin.native_routes import NativeRoutes
from bwtune.standin.openai_routes import OpenAIRoutes

__all__ = ["SIMULATED_NOTE", "App", "ServerState", "crash_now"]  # what __main__ starts the server with


class App(InfoRoutes, NativeRoutes, OpenAIRoutes):
    """The routes by method and path, behind SGLang's API-key check."""

    def __init__(self, state: ServerState) -> None:
        super().__init__(state)
        self.routes: dict[tuple[str, str], Callable[[Request, Stream], Any]] = {}
        for methods, path, fn in (
            (("GET",), "/health", self.health),
            (("GET",), "/health_generate", self.health_generate),
            (("GET",), "/ready", self.ready),
            (("GET",), "/model_info", self.model_info),
            (("GET",), "/get_model_info", self.model_info),
            (("GET",), "/server_info", self.server_info),
            (("GET",), "/get_server_info", self.server_info),
            (("GET",), "/v1/models", self.models),
            (("POST", "PUT"), "/generate", self.generate),
            (("POST",), "/v1/completions", self.completions),
            (("POST",), "/v1/chat/completions", self.chat_completions),
            (("GET",), "/metrics", self.metrics),
            (("GET", "POST"), "/flush_cache", self.flush_cache),
        ):
            for method in methods:
                self.routes[(method, path)] = fn

    async def __call__(self, request: Request, stream: Stream) -> Response | None:
        path = request.path
        if (
            request.method != "OPTIONS"
            and self.state.api_key
            and not path.startswith(("/health", "/ready", "/metrics"))
        ):
            header = request.headers.get("authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not secrets.compare_digest(token, self.state.api_key):
                return json_response({"error": "Unauthorized"}, 401)
        handler = self.routes.get((request.method, path))
        if handler is None:
            if path == "/metrics" and not self.state.args.get("enable-metrics"):
                return json_response({"detail": "Not Found"}, 404)
            if any(p == path for _, p in self.routes):
                return json_response({"detail": "Method Not Allowed"}, 405)
            return json_response({"detail": "Not Found"}, 404)
        if self.state.status != "up" and not path.startswith(("/health", "/ready")):
            return json_response({"error": {"message": "The server is still starting."}}, 503)
        result: Response | None = await handler(request, stream)
        return result
