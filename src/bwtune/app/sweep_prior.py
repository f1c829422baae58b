"""The prior `adaptive` starts from: what earlier runs on the same hardware group measured
of this matrix's configs, read from the results database."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import plan
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import CatalogError
from bwtune import store
from bwtune.analysis.hardware_group import HardwareGroup
from bwtune.app.sweep_inputs import SweepRequest


def read_prior(request: SweepRequest) -> list[dict[str, Any]]:
    """What earlier runs on the same hardware group measured of this matrix's configs, for
    `adaptive` (the sweep module's `prior`): [{config, score}], sorted by config id.

    The hardware group (bwtune.analysis.hardware_group, its same_hardware grain) is the
    matrix's `hardware.gpu` (the SM tag; none for `auto`) with the GPU count, model and
    interconnect the database last kept of the inventory's hosts in those runs, where they
    agree; an earlier line is of it when its own group (its SM and what its run kept of its
    host's GPUs) is same_hardware: a 4-GPU host's scores never steer an 8-GPU sweep.
    Runs that started before this one count (a resume reads the same prior, so it makes the
    same decisions); simulated lines count only for an inventory whose hosts are all
    simulated, and real ones only for one that has a real host. A config's score is its
    objective value in the latest run that measured it (the mean of that run's launches of
    it), else the value of its screening workload there.
    """
    gpu = (request.matrix.get("hardware") or {}).get("gpu")
    if request.strategy != "adaptive" or not isinstance(gpu, str) or gpu == "auto":
        return []
    try:
        planned = plan(request.matrix, gpu=gpu).to_dict()
    except (MatrixError, CatalogError, ValueError):
        return []  # the node's own plan says what is wrong with the matrix
    ids = {launch["config"] for launch in planned["launches"]}
    objective = contract.objective_of({**request.matrix, **planned})
    simulated = all(
        bool(request.inventory.hostvars[host].get("bwtune_simulated")) for host in request.inventory.hosts
    )
    try:
        conn = store.connect(create=False)
    except store.MissingDatabaseError:
        return []
    try:
        runs = store.runs_before(conn, request.run_id)
        kept = {run_id: _kept_gpu_facts(conn, run_id) for run_id in runs}
        group = _inventory_group(kept, runs, request.inventory.hosts, gpu)
        latest: dict[str, float] = {}
        source: dict[str, str] = {}
        for run_id in runs:
            lines = [*store.run_results(conn, run_id), *store.superseded_results(conn, run_id)]
            for config_id, value in _run_values(
                lines, ids, group, kept[run_id], simulated, objective
            ).items():
                latest[config_id] = value  # runs oldest first: the latest run's value stays
                source[config_id] = run_id
    finally:
        conn.close()
    order = runs
    request.prior_runs = [run for run in order if run in set(source.values())]
    return [{"config": config_id, "score": latest[config_id]} for config_id in sorted(latest)]


def _kept_gpu_facts(conn: sqlite3.Connection, run_id: str) -> dict[str, Mapping[str, Any]]:
    """host -> what the database kept of its GPUs for the run (hosts without any left out)."""
    return {
        host["host"]: host["gpu_facts"] for host in store.run_hosts(conn, run_id) if host.get("gpu_facts")
    }


def _inventory_group(
    kept: Mapping[str, Mapping[str, Mapping[str, Any]]], runs: list[str], hosts: list[str], gpu: str
) -> HardwareGroup:
    """The matrix's SM with the GPUs the inventory's hosts had in their latest earlier run
    (runs oldest first) of that SM, when those agree; else the SM alone. Runs before this
    one only, so a resume finds the same group (and the same prior)."""
    latest: dict[str, HardwareGroup] = {}
    for run_id in runs:
        for host in hosts:
            if host in kept[run_id]:
                found = HardwareGroup.of_result({"gpu": gpu}, kept[run_id][host])
                if found.gpu_count is not None or found.gpu_model is not None:
                    latest[host] = found
    groups = {group.hardware_key(): group for group in latest.values()}
    return next(iter(groups.values())) if len(groups) == 1 else HardwareGroup(sm=gpu)


def _run_values(
    lines: list[dict[str, Any]],
    ids: set[str],
    group: HardwareGroup,
    kept: Mapping[str, Mapping[str, Any]],
    simulated: bool,
    objective: Mapping[str, Any],
) -> dict[str, float]:
    """config id -> the mean of one run's values for it (objective, else screening workload)."""
    full: dict[str, list[float]] = {}
    screen: dict[str, list[float]] = {}
    for line in lines:
        if line.get("config_id") not in ids:
            continue
        if not HardwareGroup.of_result(line, kept.get(str(line.get("host")))).same_hardware(group):
            continue
        if bool(line.get("simulated")) != simulated:
            continue
        value = contract.eligible_value(line, objective)
        if value is not None:
            full.setdefault(line["config_id"], []).append(value)
        value = contract.eligible_value(line, objective, contract.SCREEN_WORKLOAD)
        if value is not None:
            screen.setdefault(line["config_id"], []).append(value)
    values = {c: sum(v) / len(v) for c, v in screen.items()}
    values.update({c: sum(v) / len(v) for c, v in full.items()})
    return {c: v for c, v in values.items() if v > 0}
