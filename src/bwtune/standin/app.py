"""SGLang's HTTP surface, served from the simulated engine.

Paths, methods, JSON shapes and auth follow SGLang 0.5.23 (srt/entrypoints/http_server.py,
srt/managers/tokenizer_manager.py, srt/entrypoints/openai/protocol.py, srt/utils/auth.py).
Everything that reports numbers also says they are simulated.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from bwtune.standin import faults
from bwtune.standin.args import ParsedArgs
from bwtune.standin.checkpoint import Checkpoint
from bwtune.standin.engine import Engine, Histogram, LiveRequest
from bwtune.standin.faults import Fault
from bwtune.standin.httpserver import HttpError, Request, Response, Stream, json_response
from bwtune.standin.performance import ConfigPerformance
from bwtune.standin.profile import Profile
from bwtune.standin.textgen import EOS_TOKEN_ID, count_tokens, piece_id, plan_completion

SIMULATED_NOTE = "bwtune stand-in: every number from this server is SIMULATED, not measured on a GPU"
DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's sampling_params default for /generate


def _dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


@dataclass
class ServerState:
    args: ParsedArgs
    checkpoint: Checkpoint
    profile: Profile
    perf: ConfigPerformance
    fault: Fault | None
    served_model_name: str
    api_key: str | None
    max_running: int
    seed: int
    status: str = "starting"  # starting | up | unhealthy
    engine: Engine | None = None
    started_at: float = field(default_factory=time.time)
    startup_time: float | None = None
    memory: dict[str, float] = field(default_factory=dict)
    generation_requests: int = 0
    crash: Callable[[], None] | None = None
    verdict_recorded: bool = True  # real SGLang's verdict on these flags was found (verdicts.py)
    resolved: dict[str, Any] = field(default_factory=dict)  # the flags as SGLang resolved them


class Generation:
    """One request's tokens as the engine emits them."""

    def __init__(
        self, state: ServerState, prompt_key: str, prompt_tokens: int, max_new: int | None, ignore_eos: bool
    ):
        fault = state.fault
        garbage = fault is not None and fault.name == "garbage" and fault.arg != "nan"
        if fault is not None and fault.name == "garbage-above-batch" and state.engine is not None:
            # A kernel that breaks only in large batches: requests arriving while N or more
            # are in the server (running or queued) come out as garbage.
            garbage = state.engine.running + state.engine.queued >= fault.int_arg(8)
        self.plan = plan_completion(prompt_key, max_new, ignore_eos, garbage)
        self.pieces = self.plan.pieces
        self.req = LiveRequest(prompt_tokens, len(self.pieces))
        self.state = state
        self.rid = uuid.uuid4().hex
        self.sent = 0
        self.max_new = max_new

    @property
    def finish_reason(self) -> dict[str, Any]:
        if self.plan.stops_at_eos and self.req.generated >= len(self.pieces):
            return {"type": "stop", "matched": EOS_TOKEN_ID}
        return {"type": "length", "length": self.req.generated}

    @property
    def openai_finish_reason(self) -> str:
        return "stop" if self.finish_reason["type"] == "stop" else "length"

    def text(self, upto: int | None = None) -> str:
        return "".join(self.pieces[: self.req.generated if upto is None else upto])

    def meta_info(self, finished: bool) -> dict[str, Any]:
        req = self.req
        meta: dict[str, Any] = {
            "id": self.rid,
            "finish_reason": self.finish_reason if finished else None,
            "prompt_tokens": req.prompt_tokens,
            "weight_version": "default",
            "num_retractions": 0,
            "reasoning_tokens": 0,
            "completion_tokens": req.generated,
            "cached_tokens": 0,
        }
        spec = self.state.perf.spec
        if spec is not None and req.spec_verify_ct > 0:
            proposed = req.spec_verify_ct * (spec.num_draft_tokens - 1)
            correct = max(0, req.generated - req.spec_verify_ct)
            meta["spec_accept_rate"] = correct / proposed if proposed else 0.0
            meta["spec_accept_length"] = req.generated / req.spec_verify_ct
            meta["spec_num_correct_drafts"] = correct
            meta["spec_num_proposed_drafts"] = proposed
            meta["spec_verify_ct"] = req.spec_verify_ct
        if finished:
            meta["e2e_latency"] = (req.finished_at or time.perf_counter()) - req.created
        return meta

    async def run(self) -> AsyncIterator[bool]:
        """Submit, then yield after each step that brought tokens; True on the last."""
        state, engine = self.state, self.state.engine
        assert engine is not None
        state.generation_requests += 1
        crash_after = state.fault.int_arg(1) if state.fault and state.fault.name == "crash-after" else None
        engine.submit(self.req)
        try:
            while True:
                await self.req.event.wait()
                self.req.event.clear()
                if crash_after is not None and state.generation_requests > crash_after and state.crash:
                    state.crash()
                done = self.req.finished
                if self.req.generated > self.sent or done:
                    yield done
                    self.sent = self.req.generated
                if done:
                    return
        finally:
            engine.cancel(self.req)


def _nan_fault(state: ServerState) -> bool:
    return state.fault is not None and state.fault.name == "garbage" and state.fault.arg == "nan"


def _nan_error(code: int = 500) -> dict[str, Any]:
    return {
        "message": f"RuntimeError: {faults.NAN_MESSAGE}",
        "type": "internal_error",
        "code": code,
        "retryable": False,
    }


def _openai_error(message: str, status: int, kind: str = "BadRequestError") -> Response:
    return json_response(
        {"object": "error", "message": message, "type": kind, "param": None, "code": status}, status
    )


class App:
    def __init__(self, state: ServerState) -> None:
        self.state = state
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

    # ------------------------------------------------------------------ health and info

    async def health(self, request: Request, stream: Stream) -> Response:
        return Response(200 if self.state.status == "up" else 503, b"", "text/plain")

    async def ready(self, request: Request, stream: Stream) -> Response:
        return await self.health(request, stream)

    async def health_generate(self, request: Request, stream: Stream) -> Response:
        if self.state.status != "up":
            return Response(503, b"", "text/plain")
        gen = Generation(self.state, "health", 1, 1, False)
        self.state.generation_requests -= 1  # health checks are not user requests
        async for _ in gen.run():
            pass
        return Response(200, b"", "text/plain")

    async def model_info(self, request: Request, stream: Stream) -> Response:
        s = self.state
        return json_response(
            {
                "model_path": s.args.get("model-path"),
                "served_model_name": s.served_model_name,
                "tokenizer_path": s.args.get("tokenizer-path") or s.args.get("model-path"),
                "is_generation": True,
                "preferred_sampling_params": s.args.get("preferred-sampling-params"),
                "weight_version": "default",
                "load_format": s.args.get("load-format", "auto"),
                "reasoning_parser": s.args.get("reasoning-parser"),
                "tool_call_parser": s.args.get("tool-call-parser"),
                "disaggregation_mode": s.args.get("disaggregation-mode", "null"),
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": s.checkpoint.model_type or None,
                "architectures": [s.checkpoint.architecture],
                "simulated": True,
                "note": SIMULATED_NOTE,
            }
        )

    def internal_state(self) -> dict[str, Any]:
        s = self.state
        engine = s.engine
        out: dict[str, Any] = {
            "last_gen_throughput": engine.last_gen_throughput if engine else 0.0,
            "memory_usage": dict(s.memory),
            "effective_max_running_requests_per_dp": s.max_running,
            "num_running_reqs": engine.running if engine else 0,
            "num_queue_reqs": engine.queued if engine else 0,
        }
        if s.perf.spec is not None:
            accept = engine.sim.avg_spec_accept_length() if engine else 0.0
            out["avg_spec_accept_length"] = accept
        return out

    async def server_info(self, request: Request, stream: Stream) -> Response:
        s = self.state
        args = {name.replace("-", "_"): value for name, value in s.args.values.items()}
        engine = s.engine
        return json_response(
            {
                **args,
                "launch_command": " ".join(sys.argv),
                "startup_time": s.startup_time,
                "internal_states": [self.internal_state()],
                "version": s.profile.sglang_version,
                "frontend": "python",
                "simulated": True,
                "standin": {
                    "note": SIMULATED_NOTE,
                    "profile": s.profile.name,
                    "gpu": f"{s.profile.gpu.count}x {s.profile.gpu.name} ({s.profile.gpu.arch})",
                    "fault": f"{s.fault.name}:{s.fault.arg}"
                    if s.fault and s.fault.arg
                    else (s.fault.name if s.fault else None),
                    "seed": s.seed,
                    "launch_speed_factor": engine.sim.launch_factor if engine else None,
                    "performance": s.perf.reasons,
                    "predicted_decode_tok_s_single_request": s.perf.decode_tok_s_per_request(1),
                    "timing_lag_ms_mean": engine.mean_lag_ms() if engine else 0.0,
                    "timing_lag_ms_max": 1000 * engine.lag_max if engine else 0.0,
                },
            }
        )

    async def models(self, request: Request, stream: Stream) -> Response:
        s = self.state
        return json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": s.served_model_name,
                        "object": "model",
                        "created": int(s.started_at),
                        "owned_by": "sglang",
                        "root": s.args.get("model-path"),
                        "parent": None,
                        "max_model_len": s.checkpoint.context_length or s.profile.context_length,
                    }
                ],
            }
        )

    async def flush_cache(self, request: Request, stream: Stream) -> Response:
        return Response(
            200,
            b"Cache flushed.\nPlease check backend logs for more details. "
            b"(When there are running or waiting requests, the operation will not be performed.)\n",
            "text/plain",
        )

    # ------------------------------------------------------------------ native /generate

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
                return json_response({"error": _nan_error()}, 500)
            return json_response(results)
        if body.get("stream"):
            await self._generate_stream(text if text is not None else ids, max_new, ignore_eos, stream)
            return None
        result = await self._generate_one(text if text is not None else ids, max_new, ignore_eos)
        if result is None:
            return json_response({"error": _nan_error()}, 500)
        return json_response(result)

    def _new_generation(self, prompt: Any, max_new: int | None, ignore_eos: bool) -> Generation:
        if isinstance(prompt, str):
            key, n = prompt, count_tokens(prompt)
        else:
            key = "ids:" + hashlib.blake2s(json.dumps(prompt).encode(), digest_size=8).hexdigest()
            n = len(prompt)
        return Generation(self.state, key, n, max_new, ignore_eos)

    async def _generate_one(
        self, prompt: Any, max_new: int | None, ignore_eos: bool
    ) -> dict[str, Any] | None:
        gen = self._new_generation(prompt, max_new, ignore_eos)
        if _nan_fault(self.state):
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
        if _nan_fault(self.state):
            stream.send(b"data: " + _dumps({"error": _nan_error(400)}) + b"\n\n")
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

    # ------------------------------------------------------------------ OpenAI-compatible

    async def completions(self, request: Request, stream: Stream) -> Response | None:
        body = request.json()
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str) and not (
            isinstance(prompt, list) and all(isinstance(x, int) for x in prompt)
        ):
            return _openai_error("prompt must be a string or a list of token ids", 400)
        max_new = body.get("max_tokens", 16)  # OpenAI's default for completions
        return await self._openai(body, stream, prompt, max_new, chat=False)

    async def chat_completions(self, request: Request, stream: Stream) -> Response | None:
        body = request.json()
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            return _openai_error("messages must be a non-empty list", 400)
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
            return _openai_error(f"max_tokens must be a non-negative integer, got {max_new!r}", 400)
        if body.get("n", 1) != 1:
            return _openai_error("the stand-in supports n=1 only", 400)
        ignore_eos = bool(body.get("ignore_eos", False))
        if chat:
            key, prompt_tokens = prompt
            gen = Generation(self.state, key, prompt_tokens, max_new, ignore_eos)
        else:
            gen = self._new_generation(prompt, max_new, ignore_eos)
        if _nan_fault(self.state):
            return _openai_error(f"RuntimeError: {faults.NAN_MESSAGE}", 500, "InternalServerError")
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
            return b"data: " + _dumps(data) + b"\n\n"

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

    # ------------------------------------------------------------------ metrics

    async def metrics(self, request: Request, stream: Stream) -> Response:
        s, engine = self.state, self.state.engine
        if not s.args.get("enable-metrics"):
            return json_response({"detail": "Not Found"}, 404)
        labels = f'model_name="{s.served_model_name}",engine_type="unified",tp_rank="0",pp_rank="0"'
        lines = [f"# {SIMULATED_NOTE}"]

        def metric(name: str, kind: str, help_: str, value: float) -> None:
            lines.extend(
                [
                    f"# HELP sglang:{name} {help_}",
                    f"# TYPE sglang:{name} {kind}",
                    f"sglang:{name}{{{labels}}} {float(value)}",
                ]
            )

        def histogram(name: str, help_: str, h: Histogram) -> None:
            lines.extend([f"# HELP sglang:{name} {help_}", f"# TYPE sglang:{name} histogram"])
            lines.append(f"sglang:{name}_sum{{{labels}}} {h.total}")
            for edge, count in zip(h.buckets, h.counts, strict=True):
                lines.append(f'sglang:{name}_bucket{{{labels},le="{edge}"}} {float(count)}')
            lines.append(f'sglang:{name}_bucket{{{labels},le="+Inf"}} {float(h.n)}')
            lines.append(f"sglang:{name}_count{{{labels}}} {float(h.n)}")

        assert engine is not None
        metric("num_running_reqs", "gauge", "The number of running requests.", engine.running)
        metric("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", engine.queued)
        metric("gen_throughput", "gauge", "The generation throughput (token/s).", engine.last_gen_throughput)
        metric("token_usage", "gauge", "The token usage.", min(1.0, engine.running / max(1, s.max_running)))
        metric("cache_hit_rate", "gauge", "The prefix cache hit rate.", 0.0)
        accept = engine.sim.avg_spec_accept_length()
        metric(
            "spec_accept_length",
            "gauge",
            "The average acceptance length of speculative decoding.",
            accept or 0.0,
        )
        metric(
            "prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            engine.prompt_tokens_total,
        )
        metric(
            "generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            engine.generation_tokens_total,
        )
        metric("num_requests_total", "counter", "Number of requests processed.", engine.num_requests)
        histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", engine.ttft)
        histogram(
            "e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", engine.e2e
        )
        return Response(200, "\n".join(lines) + "\n", "text/plain; version=0.0.4; charset=utf-8")


def crash_now(message: str) -> None:
    """What a scheduler crash looks like from outside: traceback, then the whole process
    tree is killed (SGLang's sigquit handler kills its own process group member by member)."""
    sys.stdout.flush()
    sys.stderr.write(faults.serving_traceback("RuntimeError", message))
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
