"""The batch simulator driven on real time: one shared clock per server.

The clock is absolute: each step ends at `previous end + step duration`, not `now +
duration`, so the stand-in's own overhead (parsing, JSON, writes) does not add up into the
simulated timing; when the loop falls behind it catches up on the next steps. The lag
(actual end - planned end) is recorded so the benchmark can show the distortion.
"""

from __future__ import annotations

import asyncio
import random
import time

from bwtune.standin.batch import BatchSimulator, SimRequest
from bwtune.standin.performance import ConfigPerformance

# SGLang's Prometheus buckets for latency histograms (srt/metrics/collector.py).
LATENCY_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
    10.0,
    20.0,
    40.0,
    60.0,
    80.0,
    120.0,
    160.0,
)


class Histogram:
    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.n += 1
        self.total += value
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1


class LiveRequest(SimRequest):
    __slots__ = ("created", "event", "finished_at", "first_token_at", "notified")

    def __init__(self, prompt_tokens: int, target_tokens: int) -> None:
        super().__init__(prompt_tokens, target_tokens)
        self.event = asyncio.Event()
        self.created = time.perf_counter()
        self.first_token_at: float | None = None
        self.finished_at: float | None = None
        self.notified = 0


class Engine:
    def __init__(self, perf: ConfigPerformance, seed: int, max_running: int) -> None:
        self.sim = BatchSimulator(perf, random.Random(seed), max_running)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.clock = 0.0
        # timing fidelity
        self.busy_since: float | None = None
        self.lag_sum = 0.0
        self.lag_max = 0.0
        self.lag_steps = 0
        # metrics (cumulative)
        self.num_requests = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.ttft = Histogram()
        self.e2e = Histogram()
        self._window_start = time.perf_counter()
        self._window_tokens = 0
        self.last_gen_throughput = 0.0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, req: LiveRequest) -> None:
        self.num_requests += 1
        self.prompt_tokens_total += req.prompt_tokens
        self.sim.add(req)
        self._wake.set()

    def cancel(self, req: LiveRequest) -> None:
        if not req.finished:
            self.sim.cancel(req)

    @property
    def running(self) -> int:
        return len(self.sim.running)

    @property
    def queued(self) -> int:
        return len(self.sim.waiting)

    def mean_lag_ms(self) -> float:
        return 1000 * self.lag_sum / self.lag_steps if self.lag_steps else 0.0

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        sim = self.sim
        while True:
            if not sim.has_work():
                self._wake.clear()
                await self._wake.wait()
                self.clock = loop.time()  # idle: the next step starts when work arrives
            duration = sim.plan_step()
            self.clock += duration
            delay = self.clock - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                await asyncio.sleep(0)  # let handlers write; catch up on the next steps
            lag = loop.time() - self.clock
            self.lag_steps += 1
            self.lag_sum += max(0.0, lag)
            self.lag_max = max(self.lag_max, lag)
            now = time.perf_counter()
            for req, emitted in sim.finish_step():
                self._deliver(req, emitted, now)

    def _deliver(self, req: SimRequest, emitted: int, now: float) -> None:
        assert isinstance(req, LiveRequest)
        if emitted:
            self.generation_tokens_total += emitted
            self._window_tokens += emitted
            if req.first_token_at is None:
                req.first_token_at = now
                self.ttft.observe(now - req.created)
        if req.finished:
            req.finished_at = now
            self.e2e.observe(now - req.created)
        elapsed = now - self._window_start
        if elapsed >= 1.0:
            self.last_gen_throughput = self._window_tokens / elapsed
            self._window_start, self._window_tokens = now, 0
        req.event.set()
