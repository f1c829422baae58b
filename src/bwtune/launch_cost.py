"""What one launch of a plan costs, in seconds: learned from measured launches of the same
hardware group when the results database holds some, else the matrix's estimates.

A measured launch's cost is its cold start (the line's `cold_start.to_ready_s`, or the
`timings.startup_s` of lines older than it), its correctness gate and its stop, plus its
workloads (`timings.bench_s`). The plan takes the median of each over the group's ok
launches: the median, because one slow first launch (a cold page cache, JIT caches to
fill) must not set the price of all. Workload time depends on the matrix, so it is learned
only from launches that ran the same workloads (by name); otherwise the matrix's workload
estimates stand. Simulated launches (the stand-in) never price real GPUs: a plan for real
hardware learns from real launches only (the stand-in starts in seconds, a real server in
minutes), and says how many simulated ones it left out; only an estimate asked for the
stand-in (`simulated=True`) learns from them, and says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract

MEASURED = "results database"
MATRIX = "matrix"


@dataclass(frozen=True)
class LaunchCost:
    """Seconds per launch and where they come from."""

    source: str  # MEASURED or MATRIX
    startup_s: float  # cold start, gate and stop (the matrix's estimates.startup_s otherwise)
    workload_s: float
    launches: int = 0  # measured launches the startup figure is the median of
    workload_launches: int = 0  # measured launches the workload figure is the median of
    simulated: bool = False  # learned from the stand-in's simulated launches
    left_out: int = 0  # launches of the other kind (simulated for a real plan) not counted

    @property
    def per_launch_s(self) -> float:
        return self.startup_s + self.workload_s

    def describe(self) -> str:
        """One line saying where the figures come from."""
        if self.source == MATRIX:
            return (
                "estimate from the matrix (estimates.startup_s, workload estimate_s; defaults where unset)"
                + (
                    f"; {self.left_out} simulated launches (stand-in) in the results database not counted"
                    if self.left_out and not self.simulated
                    else ""
                )
            )
        kind = "simulated launches (stand-in)" if self.simulated else "measured launches"
        workloads = (
            f"workloads: median of {self.workload_launches} launches with the same workloads"
            if self.workload_launches
            else "workloads: the matrix's estimates (no launch ran these workloads)"
        )
        return f"from the results database: cold start median of {self.launches} {kind}; {workloads}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "startup_s": round(self.startup_s, 1),
            "workload_s": round(self.workload_s, 1),
            "per_launch_s": round(self.per_launch_s, 1),
            "measured_launches": self.launches,
            "measured_workload_launches": self.workload_launches,
            "simulated": self.simulated,
            "left_out_launches": self.left_out,
            "description": self.describe(),
        }


def _number(value: Any) -> float | None:
    if contract.is_number_or_null(value) and value is not None and value >= 0:
        return float(value)
    return None


def startup_seconds(line: Mapping[str, Any]) -> float | None:
    """A measured launch's cold start, gate and stop; None when it did not record them."""
    timings = line.get("timings") or {}
    cold = line.get("cold_start") or {}
    ready = _number(cold.get("to_ready_s")) if isinstance(cold, Mapping) else None
    if ready is None:
        ready = _number(timings.get("startup_s"))
    if ready is None:
        return None
    return ready + (_number(timings.get("gate_s")) or 0.0) + (_number(timings.get("stop_s")) or 0.0)


def _measured(lines: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The ok launches that ran their workloads in full (real and simulated alike)."""
    return [
        line
        for line in lines
        if line.get("status") == contract.OK
        and not line.get("screened_out")
        and startup_seconds(line) is not None
    ]


def estimate(
    lines: Iterable[Mapping[str, Any]],
    workloads: Sequence[str],
    *,
    matrix_startup_s: float,
    matrix_workload_s: float,
    simulated: bool = False,
) -> LaunchCost:
    """The cost of one launch running `workloads` (names), from a hardware group's lines:
    its real launches, or with `simulated` its stand-in launches; never the other kind."""
    every = _measured(lines)
    measured = [line for line in every if bool(line.get("simulated")) == simulated]
    left_out = len(every) - len(measured)
    if not measured:
        return LaunchCost(MATRIX, matrix_startup_s, matrix_workload_s, simulated=simulated, left_out=left_out)
    startup = statistics.median(s for s in map(startup_seconds, measured) if s is not None)
    wanted = set(workloads)
    bench = [
        float(line["timings"]["bench_s"])
        for line in measured
        if _number((line.get("timings") or {}).get("bench_s")) is not None
        and set(line.get("metrics") or {}) - {contract.SCREEN_WORKLOAD} == wanted
    ]
    return LaunchCost(
        MEASURED,
        startup,
        statistics.median(bench) if bench else matrix_workload_s,
        launches=len(measured),
        workload_launches=len(bench),
        simulated=simulated,
        left_out=left_out,
    )
