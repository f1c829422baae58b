"""SGLang's native `/generate` route (srt/entrypoints/http_server.py,
srt/managers/tokenizer_manager.py), served from the simulated engine."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bwtune.standin.generation import (
    DEFAULT_MAX_NEW_TOKENS,
    Routes,
    dumps,
    nan_error,
    nan_fault,
)
from bwtune.standin.httpserver import HttpError, Request, Response, Stream, json_response
from bwtune.standin.textgen import piece_id


class NativeRoutes(Routes):
    """SGLang's native `/generate`: one prompt or a batch, whole or streamed."""

    async def generate(self, request: Request, stream: Stream) -> Response | None:
        body = request.json()
        if not isinstance(body, dict):
            raise HttpError(400, "request body must be a JSON object")
        text, ids = body.get("text"), body.get("input_ids")
        if (text is None) == (ids is None):
            return json_response({"error": {"message": "Either text or input_ids should be provided."}}, 400)
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            return json_response({"error": {"message": "sampling_params must be an object"}}, 400)
        max_new = params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        ignore_eos = bool(params.get("ignore_eos", False))
        batch = isinstance(text, list) or (isinstance(ids, list) and ids and isinstance(ids[0], list))
        if batch:
            items: list[Any] = text if isinstance(text, list) else list(ids or [])
            if body.get("stream"):
                return json_response({"error": {"message": "the stand-in streams single requests only"}}, 400)
            results = await asyncio.gather(*(self._generate_one(x, max_new, ignore_eos) for x in items))
            if any(r is None for r in results):
                return json_response({"error": nan_error()}, 500)
            return json_response(results)
        if body.get("stream"):
            await self._generate_stream(text if text is not None else ids, max_new, ignore_eos, stream)
            return None
        result = await self._generate_one(text if text is not None else ids, max_new, ignore_eos)
        if result is None:
            return json_response({"error": nan_error()}, 500)
        return json_response(result)

    async def _generate_one(
        self, prompt: Any, max_new: int | None, ignore_eos: bool
    ) -> dict[str, Any] | None:
        gen = self._new_generation(prompt, max_new, ignore_eos)
        if nan_fault(self.state):
            return None
        async for _ in gen.run():
            pass
        return {
            "text": gen.text(),
            "output_ids": [piece_id(p) for p in gen.pieces[: gen.req.generated]],
            "meta_info": gen.meta_info(True),
        }

    async def _generate_stream(
        self, prompt: Any, max_new: int | None, ignore_eos: bool, stream: Stream
    ) -> None:
        gen = self._new_generation(prompt, max_new, ignore_eos)
        stream.start()
        if nan_fault(self.state):
            stream.send(b"data: " + dumps({"error": nan_error(400)}) + b"\n\n")
        else:
            # SGLang streams cumulative text and ids; keep their JSON encodings growing
            # instead of re-encoding everything per chunk (O(n) copy, not O(n) encode).
            text_json, ids_json, n = "", "", 0
            async for done in gen.run():
                if stream.closed:
                    return
                new = gen.pieces[n : gen.req.generated]
                n = gen.req.generated
                text_json += json.dumps("".join(new))[1:-1]
                ids_json += ("," if ids_json and new else "") + ",".join(str(piece_id(p)) for p in new)
                meta = json.dumps(gen.meta_info(done), separators=(",", ":"))
                chunk = f'data: {{"text":"{text_json}","output_ids":[{ids_json}],"meta_info":{meta}}}\n\n'
                stream.send(chunk.encode())
                await stream.flush()
        stream.send(b"data: [DONE]\n\n")
        stream.end()
