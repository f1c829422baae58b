# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""What a benchmark workload is: the one definition of its keys, defaults and checks.

bench_client runs a Workload; the matrix validates its `workloads:` entries through
Workload.from_dict, so a key the client accepts is a key the matrix accepts and the error
for a bad value is the same in both. Kept apart from bench_client so that planning a
matrix does not import asyncio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_stats import Slo
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.capacity_search import (
    MIN_ROUND_REQUESTS,
    CapacitySpec,
    CapacitySpecError,
)

APIS = ("generate", "completions")
SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
# Keys of a matrix workload that only the planner reads (its time estimate).
PLANNER_ONLY_KEYS = ("estimate_s",)
# When num_prompts is not given: one request per concurrency slot (closed loop), or this
# many for an open loop (request_rate / all at once).
OPEN_LOOP_PROMPTS = 64
# The most a workload may ask for: beyond these it is a typo (1e12 prompts), not a benchmark.
MAXIMA = {
    "input_len": 1_048_576,
    "output_len": 1_048_576,
    "num_prompts": 100_000,
    "repetitions": 100,
    "warmup": 10_000,
    "concurrency": 100_000,
}


class WorkloadError(ValueError):
    """A workload description that cannot be run.

    `key` is the path of the bad value inside the workload mapping (("warmup",),
    ("slo", "ttft_ms")), `reason` what is wrong with it; str() names the workload too.
    """

    def __init__(self, workload: str, key: tuple[str, ...], reason: str) -> None:
        super().__init__(f"workload {workload!r}: {reason}")
        self.workload = workload
        self.key = key
        self.reason = reason


def _check_slo(workload: str, key: tuple[str, ...], v: Any) -> Any:
    if v is not None and (not _is_number(v) or not 0 < v < math.inf):
        raise WorkloadError(workload, key, f"{'.'.join(key)} must be a number of ms > 0, got {v!r}")
    return v


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(frozen=True)
class Workload:
    """One benchmark workload. concurrency=None with request_rate=None sends all at once.

    With `capacity` set it is a capacity search (capacity_search): rounds of num_prompts
    requests at Poisson rates chosen by the search, request_rate unused once it started."""

    name: str = "default"
    input_len: int = 1024
    output_len: int = 256
    num_prompts: int = OPEN_LOOP_PROMPTS
    concurrency: int | None = 1
    request_rate: float | None = None
    warmup: int = 1
    repetitions: int = 1
    seed: int = 0
    api: str = "generate"
    stream: bool = True
    slo: Slo | None = None
    capacity: CapacitySpec | None = None

    def __post_init__(self) -> None:
        def bad(key: str, reason: str) -> WorkloadError:
            return WorkloadError(str(self.name), (key,), f"{key} {reason}, got {getattr(self, key)!r}")

        if not isinstance(self.name, str) or not self.name:
            raise bad("name", "must be a non-empty string")
        for key in ("input_len", "output_len", "num_prompts", "repetitions"):
            v = getattr(self, key)
            if not _is_int(v) or v < 1:
                raise bad(key, "must be an integer >= 1")
        if not _is_int(self.warmup) or self.warmup < 0:
            raise bad("warmup", "must be an integer >= 0")
        if self.concurrency is not None and (not _is_int(self.concurrency) or self.concurrency < 1):
            raise bad("concurrency", "must be an integer >= 1 (or null: no limit)")
        for key, most in MAXIMA.items():
            v = getattr(self, key)
            if v is not None and v > most:
                raise bad(key, f"must be at most {most:,}")
        if self.request_rate is not None and (not _is_number(self.request_rate) or not self.request_rate > 0):
            raise bad("request_rate", "must be a number > 0")
        if self.request_rate is not None and self.request_rate == math.inf:
            raise bad("request_rate", "must be a finite number (leave it out to send all at once)")
        if not _is_int(self.seed):
            raise bad("seed", "must be an integer")
        if self.api not in APIS:
            raise bad("api", f"must be one of {', '.join(APIS)}")
        if not isinstance(self.stream, bool):
            raise bad("stream", "must be true or false")
        if self.slo is not None:
            for key in SLO_KEYS:
                _check_slo(self.name, ("slo", key), getattr(self.slo, key))
        if self.capacity is not None and self.num_prompts < MIN_ROUND_REQUESTS:
            raise bad(
                "num_prompts",
                f"must be at least {MIN_ROUND_REQUESTS} in a capacity search (requests per round:"
                " a p99 of fewer is the slowest request)",
            )

    @classmethod
    def from_dict(cls, d: dict[str, Any], name: str | None = None) -> Workload:
        """Build from a matrix's workload mapping (see WORKLOAD_KEYS).

        SLO thresholds come as slo_{ttft,tpot,e2e}_ms or slo: {ttft_ms, ...}. num_prompts
        defaults to concurrency (one request per slot), or OPEN_LOOP_PROMPTS without one.
        """
        d = dict(d)
        wname = d.pop("name", name or "default")
        if not isinstance(wname, str) or not wname:
            raise WorkloadError(str(wname), ("name",), f"name must be a non-empty string, got {wname!r}")
        for key in d:
            if key not in WORKLOAD_KEYS or key == "name":
                raise WorkloadError(wname, (str(key),), f"unknown key {key!r}")
        slo_raw = d.pop("slo", None) or {}
        if not isinstance(slo_raw, dict):
            raise WorkloadError(
                wname, ("slo",), f"slo must be a mapping of {', '.join(SLO_KEYS)}, got {slo_raw!r}"
            )
        for key in slo_raw:
            if key not in SLO_KEYS:
                raise WorkloadError(
                    wname, ("slo", str(key)), f"unknown slo key {key!r} (known: {', '.join(SLO_KEYS)})"
                )
        slo_d = dict(slo_raw)
        for key in SLO_KEYS:
            if f"slo_{key}" in d:
                if key in slo_d:
                    raise WorkloadError(
                        wname, (f"slo_{key}",), f"slo_{key} is also set as slo.{key}; keep one"
                    )
                slo_d[key] = _check_slo(wname, (f"slo_{key}",), d.pop(f"slo_{key}"))
        for key in PLANNER_ONLY_KEYS:
            d.pop(key, None)
        capacity = None
        if d.get("capacity") is not None:
            rate = d.get("request_rate")
            try:
                capacity = CapacitySpec.from_dict(d.pop("capacity"), rate if _is_number(rate) else None)
            except CapacitySpecError as err:
                raise WorkloadError(wname, ("capacity", *err.key), str(err)) from None
            # Open loop (Poisson arrivals, no cap on requests in flight), 100 requests a round.
            d.setdefault("concurrency", None)
            d.setdefault("num_prompts", MIN_ROUND_REQUESTS)
        d.pop("capacity", None)
        if "num_prompts" not in d:
            d["num_prompts"] = d.get("concurrency", 1) or OPEN_LOOP_PROMPTS
        slo = Slo(**slo_d) if slo_d else None
        return cls(name=wname, slo=slo, capacity=capacity, **d)

    def to_dict(self) -> dict[str, Any]:
        """Every key, so from_dict(to_dict()) is the same workload whatever the defaults."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("slo", "capacity")}
        if self.slo is not None:
            d["slo"] = {k: v for k, v in vars(self.slo).items() if v is not None}
        if self.capacity is not None:
            d["capacity"] = self.capacity.to_dict()
        return d


# Every key a workload mapping may have: the dataclass's fields, the flat SLO spellings and
# the planner's estimate.
WORKLOAD_KEYS = (
    tuple(f.name for f in fields(Workload)) + tuple(f"slo_{k}" for k in SLO_KEYS) + PLANNER_ONLY_KEYS
)


def workload_dict(w: Workload) -> dict[str, Any]:
    return w.to_dict()
