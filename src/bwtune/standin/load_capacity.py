"""The stand-in's true capacity under a latency SLO, computed from the profile alone.

The server and this module run the same batch simulator (batch.py): requests wait in the
queue while max-running-requests are running; a prefill step of newly admitted requests
stalls the decode of the running batch (SGLang's default scheduler, no mixed chunks), so
TTFT = queue wait + prefill and every prefill adds to the TPOT of the requests decoding;
a decode step's time grows with the running batch along the profile's decode curve.

`simulate_round` drives it on a virtual clock with an open-loop client: `requests`
Poisson arrivals at a rate (the first at t=0), the percentiles of the round measured as
sglang.bench_serving defines them (TTFT = first token - send, TPOT = (latency - TTFT) /
(output_len - 1)). `true_capacity` bisects the rate to the highest one at which the
median round over `seeds` rounds meets every SLO percentile: the load a benchmark sending
rounds of that many requests finds, give or take its own round-to-round spread. Without
run-to-run noise (the launch factor is 1, steps do not jitter): the profile's own figure.

Kept independent of the code it checks: nothing here imports the bench client or planner.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bwtune.standin.batch import BatchSimulator, SimRequest
from bwtune.standin.performance import ConfigPerformance, max_running_requests
from bwtune.standin.profile import Profile

# SLO keys: <summary>_<metric>_ms, the names of bench_serving's (and bwtune's) metrics.
SUMMARIES = ("mean", "median", "p90", "p99")
METRICS = ("ttft", "tpot", "e2e_latency")


@dataclass(frozen=True)
class RoundLoad:
    input_len: int = 1024
    output_len: int = 256
    requests: int = 100


def _percentile(values: list[float], q: float) -> float:
    """numpy's default (linear between closest ranks), as bench_stats.percentile."""
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _summary(values: list[float], how: str) -> float:
    if how == "mean":
        return sum(values) / len(values) if values else 0.0
    if how == "median":
        return _percentile(values, 50)
    return _percentile(values, float(how[1:]))


def round_metrics(ttft: list[float], tpot: list[float], e2e: list[float]) -> dict[str, float]:
    series = {"ttft": ttft, "tpot": tpot, "e2e_latency": e2e}
    return {
        f"{how}_{name}_ms": _summary(values, how) * 1000.0
        for name, values in series.items()
        for how in SUMMARIES
    }


def arrival_times(rate: float, n: int, rng: random.Random) -> list[float]:
    """Send times of a round: Poisson arrivals conditioned on the round's mean rate being
    `rate` (exponential gaps scaled to sum to (n - 1) / rate), as the bench client sends a
    capacity round. Plain Poisson arrivals make a 100-request round's own rate vary by
    +-10%, which near the knee moves its p99 more than the rate step being measured."""
    gaps = [rng.expovariate(1.0) for _ in range(n - 1)]
    scale = (n - 1) / rate / sum(gaps) if gaps else 0.0
    out = [0.0]
    for g in gaps:
        out.append(out[-1] + g * scale)
    return out


def simulate_round(
    perf: ConfigPerformance, max_running: int, rate: float, load: RoundLoad, seed: int = 0
) -> dict[str, float]:
    """One open-loop round at `rate` requests/s on a virtual clock: its latency summaries."""
    arrivals = arrival_times(rate, load.requests, random.Random(f"capacity/{seed}"))
    sim = BatchSimulator(perf, random.Random(seed), max_running)
    sim.launch_factor, sim.step_noise_cv = 1.0, 0.0
    sent_at: dict[int, float] = {}
    first: dict[int, float] = {}
    ttft: list[float] = []
    tpot: list[float] = []
    e2e: list[float] = []
    now, nxt, done = 0.0, 0, 0
    while done < load.requests:
        while nxt < load.requests and arrivals[nxt] <= now:
            req = SimRequest(load.input_len, load.output_len)
            sent_at[req.id] = arrivals[nxt]
            sim.add(req)
            nxt += 1
        if not sim.has_work():
            now = arrivals[nxt]  # idle: the next step starts when the next request arrives
            continue
        now += sim.plan_step()
        for req, emitted in sim.finish_step():
            if emitted and req.id not in first:
                first[req.id] = now
                ttft.append(now - sent_at[req.id])
            if req.finished:
                done += 1
                latency = now - sent_at[req.id]
                e2e.append(latency)
                if req.target_tokens > 1:
                    decode_s = now - first[req.id]
                    tpot.append(decode_s / (req.target_tokens - 1))
    return round_metrics(ttft, tpot, e2e)


def check_slo(slo: Mapping[str, float]) -> None:
    known = [f"{how}_{name}_ms" for name in METRICS for how in SUMMARIES]
    if not slo:
        raise ValueError("an SLO needs at least one threshold")
    for key, value in slo.items():
        if key not in known:
            raise ValueError(f"unknown SLO key {key!r} (known: {', '.join(known)})")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
            raise ValueError(f"SLO {key} must be a number of ms > 0, got {value!r}")


def meets(metrics: Mapping[str, float], slo: Mapping[str, float]) -> bool:
    return all(metrics[key] <= limit for key, limit in slo.items())


def median_round(
    perf: ConfigPerformance, max_running: int, rate: float, load: RoundLoad, seeds: int
) -> dict[str, float]:
    """Per SLO metric, the median over `seeds` rounds (each its own arrivals)."""
    rounds = [simulate_round(perf, max_running, rate, load, seed) for seed in range(seeds)]
    return {key: _percentile([r[key] for r in rounds], 50) for key in rounds[0]}


@dataclass(frozen=True)
class Capacity:
    rate: float  # requests/s; 0.0 when the SLO fails even at a trickle of requests
    max_running: int
    lower_bound: bool = False  # the SLO held even at the highest rate tried


def _steady_rate(perf: ConfigPerformance, max_running: int, load: RoundLoad) -> float:
    """Requests/s with the batch always full: a prefill of max_running requests, then their
    decode at a full batch. Where the bisection starts: a round of `requests` may pass
    somewhat above it (its queue has no time to grow), so the search looks up to 4x."""
    tokens = max(1, load.output_len - 1) / perf.mean_tokens_per_step(max_running)
    cycle = perf.prefill_seconds(load.input_len * max_running) + tokens * perf.step_seconds(max_running)
    return max_running / cycle


def true_capacity(
    profile: Profile,
    flags: Mapping[str, Any],
    slo: Mapping[str, float],
    load: RoundLoad | Mapping[str, int],
    *,
    seeds: int = 9,
    rel_tol: float = 0.002,
) -> Capacity:
    """The highest Poisson request rate at which the median round of `load.requests`
    requests meets every threshold of `slo` ({"p99_ttft_ms": 2000, "p99_tpot_ms": 50})."""
    check_slo(slo)
    if not isinstance(load, RoundLoad):
        load = RoundLoad(**dict(load))
    clean = {str(k).lstrip("-"): v for k, v in flags.items()}
    perf = ConfigPerformance.for_flags(profile, clean)
    max_running = max_running_requests(profile, perf, clean)
    hi = _steady_rate(perf, max_running, load) * 4.0
    lo = hi / 1e4
    if not meets(median_round(perf, max_running, lo, load, seeds), slo):
        return Capacity(0.0, max_running)
    if meets(median_round(perf, max_running, hi, load, seeds), slo):
        return Capacity(hi, max_running, lower_bound=True)  # rounds this short never queue enough
    while hi / lo - 1.0 > rel_tol:
        mid = math.sqrt(lo * hi)
        if meets(median_round(perf, max_running, mid, load, seeds), slo):
            lo = mid
        else:
            hi = mid
    return Capacity(lo, max_running)
