"""The stand-in server's state and one request's generation through the simulated engine,
shared by its routes (`app` routes them)."""

from __future__ import annotations

import hashlib
import json
import os
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
from bwtune.standin.engine import Engine, LiveRequest
from bwtune.standin.faults import Fault
from bwtune.standin.performance import ConfigPerformance
from bwtune.standin.profile import Profile
from bwtune.standin.textgen import EOS_TOKEN_ID, count_tokens, plan_completion

SIMULATED_NOTE = "bwtune stand-in: every number from this server is SIMULATED, not measured on a GPU"
DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's sampling_params default for /generate


def dumps(data: Any) -> bytes:
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


def nan_fault(state: ServerState) -> bool:
    return state.fault is not None and state.fault.name == "garbage" and state.fault.arg == "nan"


def nan_error(code: int = 500) -> dict[str, Any]:
    return {
        "message": f"RuntimeError: {faults.NAN_MESSAGE}",
        "type": "internal_error",
        "code": code,
        "retryable": False,
    }


class Routes:
    """What every group of routes shares: the server's state, and a generation for a prompt
    given as text or as token ids."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    def _new_generation(self, prompt: Any, max_new: int | None, ignore_eos: bool) -> Generation:
        if isinstance(prompt, str):
            key, n = prompt, count_tokens(prompt)
        else:
            key = "ids:" + hashlib.blake2s(json.dumps(prompt).encode(), digest_size=8).hexdigest()
            n = len(prompt)
        return Generation(self.state, key, n, max_new, ignore_eos)


def crash_now(message: str) -> None:
    """What a scheduler crash looks like from outside: traceback, then the whole process
    tree is killed (SGLang's sigquit handler kills its own process group member by member)."""
    sys.stdout.flush()
    sys.stderr.write(faults.serving_traceback("RuntimeError", message))
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
