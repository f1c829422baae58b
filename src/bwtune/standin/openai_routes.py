"""SGLang's OpenAI-compatible routes (srt/entrypoints/openai/protocol.py), served from the
simulated engine."""

from __future__ import annotations

import time
from typing import Any

from bwtune.standin import faults
from bwtune.standin.generation import (
    Generation,
    Routes,
    dumps,
    nan_fault,
)
from bwtune.standin.httpserver import Request, Response, Stream, json_response
from bwtune.standin.textgen import EOS_TOKEN_ID, count_tokens


def openai_error(message: str, status: int, kind: str = "BadRequestError") -> Response:
    return json_response(
        {"object": "error", "message": message, "type": kind, "param": None, "code": status}, status
    )


class OpenAIRoutes(Routes):
    """`/v1/completions` and `/v1/chat/completions`, whole or streamed (with usage)."""

    async def completions(self, request: Request, stream: Stream) -> Response | None:
        body = request.json()
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str) and not (
            isinstance(prompt, list) and all(isinstance(x, int) for x in prompt)
        ):
            return openai_error("prompt must be a string or a list of token ids", 400)
        max_new = body.get("max_tokens", 16)  # OpenAI's default for completions
        return await self._openai(body, stream, prompt, max_new, chat=False)

    async def chat_completions(self, request: Request, stream: Stream) -> Response | None:
        body = request.json()
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            return openai_error("messages must be a non-empty list", 400)
        texts = []
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            texts.append(content or "")
        users = [
            t for m, t in zip(messages, texts, strict=True) if isinstance(m, dict) and m.get("role") == "user"
        ]
        key = users[-1] if users else texts[-1]
        # Chat template: a few tokens of role markers per message.
        prompt_tokens = sum(count_tokens(t) + 4 for t in texts) + 3
        max_new = body.get("max_completion_tokens", body.get("max_tokens"))
        return await self._openai(body, stream, (key, prompt_tokens), max_new, chat=True)

    async def _openai(
        self, body: dict[str, Any], stream: Stream, prompt: Any, max_new: Any, chat: bool
    ) -> Response | None:
        if max_new is not None and (not isinstance(max_new, int) or max_new < 0):
            return openai_error(f"max_tokens must be a non-negative integer, got {max_new!r}", 400)
        if body.get("n", 1) != 1:
            return openai_error("the stand-in supports n=1 only", 400)
        ignore_eos = bool(body.get("ignore_eos", False))
        if chat:
            key, prompt_tokens = prompt
            gen = Generation(self.state, key, prompt_tokens, max_new, ignore_eos)
        else:
            gen = self._new_generation(prompt, max_new, ignore_eos)
        if nan_fault(self.state):
            return openai_error(f"RuntimeError: {faults.NAN_MESSAGE}", 500, "InternalServerError")
        created = int(time.time())
        rid = ("chatcmpl-" if chat else "cmpl-") + gen.rid
        model = body.get("model") or self.state.served_model_name
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            await self._openai_stream(gen, stream, rid, created, model, chat, include_usage)
            return None
        async for _ in gen.run():
            pass
        usage = self._usage(gen)
        text = gen.text()
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "reasoning_content": None,
                    "tool_calls": None,
                },
                "logprobs": None,
                "finish_reason": gen.openai_finish_reason,
                "matched_stop": EOS_TOKEN_ID if gen.openai_finish_reason == "stop" else None,
            }
            obj = "chat.completion"
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": gen.openai_finish_reason,
                "matched_stop": EOS_TOKEN_ID if gen.openai_finish_reason == "stop" else None,
            }
            obj = "text_completion"
        return json_response(
            {
                "id": rid,
                "object": obj,
                "created": created,
                "model": model,
                "choices": [choice],
                "usage": usage,
                "metadata": {"weight_version": "default"},
            }
        )

    @staticmethod
    def _usage(gen: Generation) -> dict[str, Any]:
        p, c = gen.req.prompt_tokens, gen.req.generated
        return {
            "prompt_tokens": p,
            "total_tokens": p + c,
            "completion_tokens": c,
            "prompt_tokens_details": None,
        }

    async def _openai_stream(
        self,
        gen: Generation,
        stream: Stream,
        rid: str,
        created: int,
        model: str,
        chat: bool,
        include_usage: bool,
    ) -> None:
        obj = "chat.completion.chunk" if chat else "text_completion"

        def chunk(choice: dict[str, Any] | None, usage: dict[str, Any] | None = None) -> bytes:
            data = {
                "id": rid,
                "object": obj,
                "created": created,
                "model": model,
                "choices": [choice] if choice else [],
                "usage": usage,
            }
            return b"data: " + dumps(data) + b"\n\n"

        def choice(text: str | None, finish: str | None) -> dict[str, Any]:
            out: dict[str, Any] = {
                "index": 0,
                "logprobs": None,
                "finish_reason": finish,
                "matched_stop": EOS_TOKEN_ID if finish == "stop" else None,
            }
            if chat:
                delta: dict[str, Any] = {}
                if text is not None:
                    delta["content"] = text
                out["delta"] = delta
            else:
                out["text"] = text or ""
            return out

        stream.start()
        if chat:
            first = choice("", None)
            first["delta"] = {"role": "assistant", "content": ""}
            stream.send(chunk(first))
        sent = 0
        async for _ in gen.run():
            if stream.closed:
                return
            upto = gen.req.generated
            if upto > sent:
                stream.send(chunk(choice("".join(gen.pieces[sent:upto]), None)))
                sent = upto
                await stream.flush()
        stream.send(chunk(choice(None if chat else "", gen.openai_finish_reason)))
        if include_usage:
            stream.send(chunk(None, self._usage(gen)))
        stream.send(b"data: [DONE]\n\n")
        stream.end()
