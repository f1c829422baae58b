# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Benchmark metrics with sglang.bench_serving's definitions, and statistics over repetitions.

Per run (one repetition of one workload):
  TTFT = first token arrival - send; ITL = gaps between streamed chunks, a chunk carrying k
  tokens counting as k gaps of gap/k; TPOT = (latency - TTFT) / (output_len - 1);
  throughputs = tokens or requests / run duration; output tokens from meta_info.completion_tokens.
Over repetitions: mean, coefficient of variation and a 95% Student-t confidence interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# One definition of a results line's ci95 and cv (exact Student-t quantiles).
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_contract import mean_ci95


@dataclass
class RequestTiming:
    """What one request measured (times in seconds, perf_counter clock)."""

    ok: bool
    prompt_len: int
    output_len: int = 0
    start: float = 0.0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    spec_verify_ct: int | None = None
    error: str = ""


@dataclass(frozen=True)
class Slo:
    """Service-level objective for goodput; a None threshold is not checked."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def met_by(self, r: RequestTiming) -> bool:
        if self.ttft_ms is not None and r.ttft * 1000.0 > self.ttft_ms:
            return False
        if self.tpot_ms is not None and r.output_len > 1 and _tpot(r) * 1000.0 > self.tpot_ms:
            return False
        return not (self.e2e_ms is not None and r.latency * 1000.0 > self.e2e_ms)

    def is_set(self) -> bool:
        return self.ttft_ms is not None or self.tpot_ms is not None or self.e2e_ms is not None


LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e_latency")
SUMMARIES = ("mean", "median", "p90", "p99")


def percentile(values: Sequence[float], q: float) -> float:
    """Percentile with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _summaries(name: str, values_s: Sequence[float]) -> dict[str, float]:
    if not values_s:
        return {f"{k}_{name}_ms": 0.0 for k in SUMMARIES}
    s = sorted(values_s)
    return {
        f"mean_{name}_ms": math.fsum(s) / len(s) * 1000.0,
        f"median_{name}_ms": percentile(s, 50) * 1000.0,
        f"p90_{name}_ms": percentile(s, 90) * 1000.0,
        f"p99_{name}_ms": percentile(s, 99) * 1000.0,
    }


def _tpot(r: RequestTiming) -> float:
    return (r.latency - r.ttft) / (r.output_len - 1)


def run_metrics(
    requests: Sequence[RequestTiming], duration_s: float, slo: Slo | None = None
) -> dict[str, Any]:
    """Metrics of one run, named as sglang.bench_serving names them (plus a few of ours)."""
    done = [r for r in requests if r.ok]
    dur = duration_s if duration_s > 0 else float("nan")
    total_in = sum(r.prompt_len for r in done)
    total_out = sum(r.output_len for r in done)
    ttfts = [r.ttft for r in done]
    tpots = [_tpot(r) for r in done if r.output_len > 1]
    itls = [x for r in done for x in r.itl]
    e2e = [r.latency for r in done]
    # Single-stream decode rate: tokens after the first over time after the first, per request.
    per_request = [
        (r.output_len - 1) / (r.latency - r.ttft) for r in done if r.output_len > 1 and r.latency > r.ttft
    ]
    m: dict[str, Any] = {
        "completed": len(done),
        "failed": len(requests) - len(done),
        "duration_s": duration_s,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(done) / dur,
        "output_throughput": total_out / dur,
        "total_throughput": (total_in + total_out) / dur,
        "output_tok_s_per_request": math.fsum(per_request) / len(per_request) if per_request else 0.0,
        "concurrency": math.fsum(e2e) / dur,
    }
    m.update(_summaries("ttft", ttfts))
    m.update(_summaries("tpot", tpots))
    m.update(_summaries("itl", itls))
    m.update(_summaries("e2e_latency", e2e))
    m["accept_length"] = accept_length_from_meta(done)
    if slo is not None and slo.is_set():
        m["goodput"] = sum(1 for r in done if slo.met_by(r)) / dur
    return m


def accept_length_from_meta(requests: Iterable[RequestTiming]) -> float | None:
    """Speculative accept length = completion tokens / verify steps, over requests that report it."""
    tokens = verify = 0
    for r in requests:
        if r.spec_verify_ct:
            tokens += r.output_len
            verify += r.spec_verify_ct
    return tokens / verify if verify else None


def accept_length_from_server_info(
    before: float | None, after: float | None, tokens_before: int, tokens_run: int
) -> float | None:
    """Accept length of a run from /server_info's cumulative avg_spec_accept_length.

    The server's figure is tokens / verify steps since start. Knowing the tokens generated
    before the run and during it gives verify steps for each, hence the run's own ratio.
    Falls back to the cumulative figure when the split cannot be made.
    """
    if not after:
        return None
    if not before or tokens_before <= 0 or tokens_run <= 0:
        return after
    verify_run = (tokens_before + tokens_run) / after - tokens_before / before
    if verify_run <= 0:
        return after
    return tokens_run / verify_run


def aggregate(repetitions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The results file's per-workload layout: n, values (means), ci95, cv, repetitions."""
    if not repetitions:
        raise ValueError("aggregate() needs at least one repetition")
    names: list[str] = []
    for rep in repetitions:
        names.extend(k for k in rep if k not in names)
    values: dict[str, Any] = {}
    ci95: dict[str, list[float] | None] = {}
    cv: dict[str, float | None] = {}
    for name in names:
        series = [rep.get(name) for rep in repetitions]
        nums = [float(v) for v in series if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not nums or any(math.isnan(v) for v in nums):
            values[name] = None
            continue
        mean, ci, c = mean_ci95(nums)
        values[name] = mean
        ci95[name] = list(ci) if ci else None
        cv[name] = c
    return {
        "n": len(repetitions),
        "values": values,
        "ci95": ci95,
        "cv": cv,
        "repetitions": [dict(r) for r in repetitions],
    }
