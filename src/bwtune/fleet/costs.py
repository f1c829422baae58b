"""What each launch of a group's plan is estimated to cost, in seconds: what `share` balances.

A launch's cost is its cold start (with the gate and the stop) plus its workloads, each
figure the median over measured launches, taken from the first of:

1. the same config's launches on the same hardware (`config`);
2. else the launches of the configs that share the most axis values with it, at least one
   (`axis values`): a backend or a tp size sets most of a cold start;
3. else the plan's estimate (`plan`: the matrix's, or bwtune.launch_cost's from the group).

The workload figure is learnt only from launches that ran the same workloads (by name);
otherwise the plan's workload estimate stands beside the measured cold start. Measured
launches are those bwtune.launch_cost counts (ok, not screened out, a recorded cold start),
of the group's hardware (bwtune.analysis.hardware_group's same_hardware) and of the plan's
kind: the stand-in's simulated seconds never price real GPUs, nor the other way round.
"""

from __future__ import annotations

import sqlite3
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import launch_cost, store
from bwtune.analysis.hardware_group import HardwareGroup
from bwtune.fleet.shares import Launch

CONFIG = "config"
AXES = "axis values"
PLAN = "plan"


@dataclass(frozen=True)
class Estimate:
    config: str
    cost_s: float
    source: str  # CONFIG, AXES or PLAN
    launches: int = 0  # measured launches the cold start is the median of


def group_lines(conn: sqlite3.Connection, group: HardwareGroup, *, simulated: bool) -> list[dict[str, Any]]:
    """The measured launches of `group`'s hardware and of the plan's kind, from the store's
    queries (launched_lines by SM, run_hosts for what each run kept of its hosts' GPUs)."""
    if group.sm is None:
        return []
    kept: dict[str, dict[str, Any]] = {}
    found = []
    for line in store.launched_lines(conn, group.sm):
        run_id = line.get("run_id")
        if not isinstance(run_id, str) or not line.get("config_id"):
            continue  # a row older than whole lines: no config to price
        if run_id not in kept:
            kept[run_id] = {h["host"]: h.get("gpu_facts") for h in store.run_hosts(conn, run_id)}
        line_group = HardwareGroup.of_result(line, kept[run_id].get(str(line.get("host"))))
        if line_group.same_hardware(group) and bool(line.get("simulated")) == simulated:
            found.append(line)
    return found


def estimate_costs(
    launches: Sequence[Mapping[str, Any]],
    points: Mapping[str, Mapping[str, Any]],
    lines: Iterable[Mapping[str, Any]],
    *,
    plan_startup_s: float,
    plan_workload_s: float,
) -> dict[str, Estimate]:
    """config id -> its launch's Estimate. `launches` are a plan's (`config`, `workloads`),
    `points` each config's axis values (the plan's configs), `lines` the group's measured
    launches (group_lines)."""
    measured = [line for line in lines if _measured(line)]
    by_config: dict[str, list[Mapping[str, Any]]] = {}
    for line in measured:
        by_config.setdefault(str(line["config_id"]), []).append(line)
    estimates = {}
    for launch in launches:
        config = str(launch["config"])
        workloads = {str(_name(w)) for w in launch.get("workloads") or []}
        own = by_config.get(config)
        if own:
            source, used = CONFIG, own
        else:
            used = _neighbours(points.get(config) or {}, measured)
            source = AXES if used else PLAN
        if not used:
            estimates[config] = Estimate(config, plan_startup_s + plan_workload_s, PLAN)
            continue
        startup = statistics.median(s for s in map(launch_cost.startup_seconds, used) if s is not None)
        bench = [b for b in (_bench(line, workloads) for line in used) if b is not None]
        workload = statistics.median(bench) if bench else plan_workload_s
        estimates[config] = Estimate(config, startup + workload, source, len(used))
    return estimates


def as_launches(launches: Sequence[Mapping[str, Any]], estimates: Mapping[str, Estimate]) -> list[Launch]:
    """The plan's launches with their estimated costs, in the plan's order, for share()."""
    return [Launch(str(launch["config"]), estimates[str(launch["config"])].cost_s) for launch in launches]


def _measured(line: Mapping[str, Any]) -> bool:
    return (
        line.get("status") == contract.OK
        and not line.get("screened_out")
        and bool(line.get("config_id"))
        and launch_cost.startup_seconds(line) is not None
    )


def _neighbours(point: Mapping[str, Any], lines: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The lines whose point shares the most axis values with `point` (at least one)."""
    best, found = 0, []
    for line in lines:
        theirs = line.get("point") or {}
        shared = sum(1 for axis, value in point.items() if axis in theirs and theirs[axis] == value)
        if shared > best:
            best, found = shared, [line]
        elif shared == best and shared > 0:
            found.append(line)
    return found


def _bench(line: Mapping[str, Any], workloads: set[str]) -> float | None:
    """The line's workload seconds when it ran exactly these workloads."""
    ran = set(line.get("metrics") or {}) - {contract.SCREEN_WORKLOAD}
    value = (line.get("timings") or {}).get("bench_s")
    if ran != workloads or isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def _name(workload: Any) -> Any:
    return workload.get("name") if isinstance(workload, Mapping) else workload
