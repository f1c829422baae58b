# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Capacity under a latency SLO: the highest request rate at which the SLO percentiles hold.

A capacity workload measures rounds on the warm server, each an open-loop round of
`num_prompts` requests (at least MIN_ROUND_REQUESTS) with Poisson arrivals at one rate:
  - bracket: from the start rate, double while rounds pass, halve while they fail;
  - bisect: between the last passing and the first failing rate, at their midpoint,
    until they are within `rel_tol` of each other or `max_rounds` rounds are spent.
The capacity is the highest rate that passed. No rate passed: 0, with the reason. Every
rate tried passed (the rounds ran out, or the search reached `max_rate`): that rate, as a
lower bound ("at least X").

A round passes when every request succeeded and each SLO key (a metric of the round as
bench_stats names it: p99_ttft_ms, p99_tpot_ms, p90_itl_ms, mean_e2e_latency_ms, ...) is
at most its threshold. Standard library only, no asyncio: the client drives it round by
round (next_load / record), a test drives it with a function.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

UNIT = "requests/s"
# A p99 needs 100 samples to be other than the maximum (numpy's linear interpolation puts
# p99 of n values at rank 0.99 * (n - 1)): fewer and one slow request decides the round.
MIN_ROUND_REQUESTS = 100
DEFAULT_MAX_ROUNDS = 6
MAX_ROUNDS = 20
DEFAULT_START_RATE = 1.0
DEFAULT_REL_TOL = 0.02
SLO_SUMMARIES = ("mean", "median", "p90", "p99")
SLO_METRICS = ("ttft", "tpot", "itl", "e2e_latency")
SLO_KEYS = tuple(f"{how}_{name}_ms" for name in SLO_METRICS for how in SLO_SUMMARIES)
SPEC_KEYS = ("slo", "start_rate", "max_rate", "max_rounds", "rel_tol")


class CapacitySpecError(ValueError):
    """A bad `capacity:` mapping; `key` is the path inside it, str() says what is wrong."""

    def __init__(self, key: tuple[str, ...], reason: str) -> None:
        super().__init__(reason)
        self.key = key


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class CapacitySpec:
    """What a capacity workload searches: its SLO and the bounds of the search."""

    slo: tuple[tuple[str, float], ...]
    start_rate: float = DEFAULT_START_RATE
    max_rate: float | None = None
    max_rounds: int = DEFAULT_MAX_ROUNDS
    rel_tol: float = DEFAULT_REL_TOL

    @classmethod
    def from_dict(cls, raw: Any, default_start: float | None = None) -> CapacitySpec:
        if not isinstance(raw, Mapping):
            raise CapacitySpecError((), f"capacity must be a mapping of {', '.join(SPEC_KEYS)}, got {raw!r}")
        for key in raw:
            if key not in SPEC_KEYS:
                known = ", ".join(SPEC_KEYS)
                raise CapacitySpecError((str(key),), f"unknown capacity key {key!r} (known: {known})")
        slo = raw.get("slo")
        if not isinstance(slo, Mapping) or not slo:
            raise CapacitySpecError(
                ("slo",),
                f"capacity.slo must be a mapping such as {{p99_ttft_ms: 2000, p99_tpot_ms: 50}}, got {slo!r}",
            )
        pairs = []
        for key, value in slo.items():
            if key not in SLO_KEYS:
                raise CapacitySpecError(
                    ("slo", str(key)), f"unknown capacity.slo key {key!r} (known: {', '.join(SLO_KEYS)})"
                )
            if not _number(value) or not value > 0:
                raise CapacitySpecError(
                    ("slo", key), f"capacity.slo.{key} must be a number of ms > 0, got {value!r}"
                )
            pairs.append((str(key), float(value)))
        start = raw.get("start_rate", default_start if default_start is not None else DEFAULT_START_RATE)
        if not _number(start) or not start > 0:
            raise CapacitySpecError(
                ("start_rate",), f"capacity.start_rate must be a number > 0, got {start!r}"
            )
        max_rate = raw.get("max_rate")
        if max_rate is not None and (not _number(max_rate) or not max_rate >= start):
            raise CapacitySpecError(
                ("max_rate",),
                f"capacity.max_rate must be a number >= start_rate ({start:g}), got {max_rate!r}",
            )
        rounds = raw.get("max_rounds", DEFAULT_MAX_ROUNDS)
        if not isinstance(rounds, int) or isinstance(rounds, bool) or not 1 <= rounds <= MAX_ROUNDS:
            raise CapacitySpecError(
                ("max_rounds",), f"capacity.max_rounds must be an integer 1..{MAX_ROUNDS}, got {rounds!r}"
            )
        rel_tol = raw.get("rel_tol", DEFAULT_REL_TOL)
        if not _number(rel_tol) or not 0 < rel_tol < 1:
            raise CapacitySpecError(
                ("rel_tol",), f"capacity.rel_tol must be a number in (0, 1), got {rel_tol!r}"
            )
        return cls(
            tuple(pairs),
            float(start),
            float(max_rate) if max_rate is not None else None,
            rounds,
            float(rel_tol),
        )

    def slo_dict(self) -> dict[str, float]:
        return dict(self.slo)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"slo": self.slo_dict(), "start_rate": self.start_rate}
        d["max_rounds"] = self.max_rounds
        if self.max_rate is not None:
            d["max_rate"] = self.max_rate
        d["rel_tol"] = self.rel_tol
        return d


def round_gaps(rate: float, n: int, rng: random.Random) -> list[float]:
    """The n - 1 send-time gaps of a round: Poisson arrivals (exponential gaps, seeded)
    conditioned on the round's mean rate being `rate` (scaled to sum to (n - 1) / rate).
    Plain Poisson arrivals make a 100-request round's own rate vary by +-10%, which near the
    knee moves its p99 more than the step between the rates being compared."""
    gaps = [rng.expovariate(1.0) for _gap in range(n - 1)]
    total = sum(gaps)
    if not gaps or total <= 0:
        return gaps
    scale = (n - 1) / rate / total
    return [g * scale for g in gaps]


def round_verdict(metrics: Mapping[str, Any], slo: Mapping[str, float]) -> tuple[bool, str]:
    """(passed, why not): a round passes when no request failed and every SLO metric holds."""
    failed = metrics.get("failed") or 0
    if failed:
        return False, f"{failed} request(s) failed"
    over = []
    for key, limit in slo.items():
        value = metrics.get(key)
        if value is None or not _number(value):
            over.append(f"{key} not measured")
        elif float(value) > limit:
            over.append(f"{key} {value:.1f} > {limit:g}")
    return (not over), "; ".join(over)


@dataclass
class CapacitySearch:
    """Bracket, then bisect; one load at a time (next_load), each round's verdict (record)."""

    spec: CapacitySpec
    rounds: list[dict[str, Any]] = field(default_factory=list)
    last_passing: float | None = None
    first_failing: float | None = None

    def next_load(self) -> float | None:
        """The next rate to measure, or None when the search is over."""
        if len(self.rounds) >= self.spec.max_rounds:
            return None
        lp, ff = self.last_passing, self.first_failing
        if ff is None:
            if lp is None:
                return self.spec.start_rate
            cap = self.spec.max_rate
            if cap is not None and lp >= cap:
                return None
            return min(lp * 2.0, cap) if cap is not None else lp * 2.0
        if lp is None:
            return ff / 2.0
        if ff / lp - 1.0 <= self.spec.rel_tol:
            return None
        return (lp + ff) / 2.0

    def record(self, load: float, metrics: Mapping[str, Any]) -> bool:
        slo = self.spec.slo_dict()
        passed, why = round_verdict(metrics, slo)
        row: dict[str, Any] = {"load": load}
        for key in slo:
            row[key] = metrics.get(key)
        for key in ("p99_ttft_ms", "p99_tpot_ms"):
            row.setdefault(key, metrics.get(key))
        row["completed"] = metrics.get("completed")
        row["request_throughput"] = metrics.get("request_throughput")
        row["passed"] = passed
        if why:
            row["why"] = why
        self.rounds.append(row)
        if passed:
            if self.last_passing is None or load > self.last_passing:
                self.last_passing = load
        elif self.first_failing is None or load < self.first_failing:
            self.first_failing = load
        return passed

    def result(self) -> dict[str, Any]:
        lp, ff = self.last_passing, self.first_failing
        out: dict[str, Any] = {
            "value": lp if lp is not None else 0.0,
            "unit": UNIT,
            "slo": self.spec.slo_dict(),
            "rounds": list(self.rounds),
            "last_passing": lp,
            "first_failing": ff,
            "lower_bound": lp is not None and ff is None,
        }
        if lp is None:
            lowest = min((r["load"] for r in self.rounds), default=self.spec.start_rate)
            whys = [r.get("why", "") for r in self.rounds if r["load"] == lowest]
            why = whys[0] if whys else "no round"
            out["reason"] = f"the SLO failed at every rate tried, down to {lowest:g} {UNIT} ({why})"
        elif ff is None:
            out["reason"] = f"the SLO held at every rate tried: capacity at least {lp:g} {UNIT}"
        return out


def search(spec: CapacitySpec, measure: Callable[[float], Mapping[str, Any]]) -> dict[str, Any]:
    """Run a whole search with `measure(rate) -> round metrics` (a test's fake server)."""
    s = CapacitySearch(spec)
    while (load := s.next_load()) is not None:
        s.record(load, measure(load))
    return s.result()
