"""The simulated GPU's scheduler: one running batch, stepped like SGLang's event loop.

Pure state machine on no clock: `plan_step()` admits waiting requests and says how long
the next step takes; `finish_step()` applies it and says which requests got tokens. The
server drives it on real time, `predict_output_throughput` on virtual time: one model of
timing, so tests and benchmarks compare measurements with the profile's prediction.

Like SGLang's default scheduler (no mixed chunks), a step is either a prefill of newly
admitted requests (each gets its first token) or a decode step of the whole running
batch (each request gets one token, or an accept-length draw with speculative decoding).
"""

from __future__ import annotations

import itertools
import random
from collections import deque

from bwtune.standin.performance import ConfigPerformance

_ids = itertools.count(1)


class SimRequest:
    __slots__ = ("finished", "generated", "id", "prompt_tokens", "spec_verify_ct", "target_tokens")

    def __init__(self, prompt_tokens: int, target_tokens: int) -> None:
        self.id = next(_ids)
        self.prompt_tokens = prompt_tokens
        self.target_tokens = max(0, target_tokens)
        self.generated = 0
        self.spec_verify_ct = 0
        self.finished = False


class BatchSimulator:
    def __init__(self, perf: ConfigPerformance, rng: random.Random, max_running: int) -> None:
        self.perf = perf
        self.rng = rng
        self.max_running = max(1, max_running)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        # Run-to-run variation: a launch is a little faster or slower as a whole (profile cv);
        # steps jitter around it (profile step_jitter_cv), so ITLs are not all equal.
        cv = perf.profile.cv
        self.launch_factor = max(0.5, rng.gauss(1.0, cv)) if cv > 0 else 1.0
        self.step_noise_cv = perf.profile.step_jitter_cv
        self._admitted: list[SimRequest] = []
        # Cumulative since start, as SGLang's /server_info reports them.
        self.total_generated = 0
        self.total_spec_tokens = 0
        self.total_spec_verify = 0
        self.steps = 0

    def add(self, req: SimRequest) -> None:
        self.waiting.append(req)

    def cancel(self, req: SimRequest) -> None:
        req.finished = True
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def plan_step(self) -> float:
        """Choose the next step and return its duration in seconds."""
        free = self.max_running - len(self.running)
        self._admitted = []
        while self.waiting and free > 0:
            self._admitted.append(self.waiting.popleft())
            free -= 1
        if self._admitted:
            tokens = sum(r.prompt_tokens for r in self._admitted)
            return self.perf.prefill_seconds(tokens) * self.launch_factor
        if not self.running:
            return 0.0
        seconds = self.perf.step_seconds(len(self.running)) * self.launch_factor
        if self.step_noise_cv > 0:
            seconds *= max(0.2, self.rng.gauss(1.0, self.step_noise_cv))
        return seconds

    def finish_step(self) -> list[tuple[SimRequest, int]]:
        """Apply the planned step; return (request, tokens emitted) for each request touched."""
        self.steps += 1
        out: list[tuple[SimRequest, int]] = []
        if self._admitted:
            for req in self._admitted:
                if req.finished:  # cancelled while queued
                    continue
                emitted = 1 if req.target_tokens > 0 else 0
                req.generated += emitted
                self.total_generated += emitted
                if req.generated >= req.target_tokens:
                    req.finished = True
                else:
                    self.running.append(req)
                out.append((req, emitted))
            self._admitted = []
            return out
        spec = self.perf.spec
        still: list[SimRequest] = []
        batch = len(self.running)
        for req in self.running:
            if req.finished:
                continue
            k = spec.draw(self.rng, batch) if spec else 1
            if spec:
                req.spec_verify_ct += 1
                self.total_spec_verify += 1
                self.total_spec_tokens += k
            k = min(k, req.target_tokens - req.generated)
            req.generated += k
            self.total_generated += k
            if req.generated >= req.target_tokens:
                req.finished = True
            else:
                still.append(req)
            out.append((req, k))
        self.running = still
        return out

    def avg_spec_accept_length(self) -> float | None:
        if self.perf.spec is None:
            return None
        if self.total_spec_verify == 0:
            return 0.0
        return self.total_spec_tokens / self.total_spec_verify


def predict_output_throughput(
    perf: ConfigPerformance,
    concurrency: int,
    input_len: int,
    output_len: int,
    num_prompts: int,
    max_running: int | None = None,
    seed: int = 0,
) -> float:
    """Output tokens per second of a closed-loop client (each of `concurrency` workers sends
    its next request when the previous one finishes), without run-to-run noise."""
    sim = BatchSimulator(perf, random.Random(seed), max_running or perf.profile.default_max_running_requests)
    sim.step_noise_cv = 0.0
    sent = 0
    now = 0.0
    for _ in range(min(concurrency, num_prompts)):
        sim.add(SimRequest(input_len, output_len))
        sent += 1
    done = 0
    tokens = 0
    while done < num_prompts:
        now += sim.plan_step()
        for req, emitted in sim.finish_step():
            tokens += emitted
            if req.finished:
                done += 1
                if sent < num_prompts:
                    sim.add(SimRequest(input_len, output_len))
                    sent += 1
    return tokens / now
