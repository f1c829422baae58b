"""SGLang's health, info and metrics routes (srt/entrypoints/http_server.py), served from
the simulated engine; every number in them says it is simulated."""

from __future__ import annotations

import sys
from typing import Any

from bwtune.standin.engine import Histogram
from bwtune.standin.generation import (
    SIMULATED_NOTE,
    Generation,
    Routes,
)
from bwtune.standin.httpserver import Request, Response, Stream, json_response


class InfoRoutes(Routes):
    """Health, readiness, model and server info, the model list, the cache flush, metrics."""

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
