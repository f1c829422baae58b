"""Runs, hosts and stacks: what a run was asked for (its matrix, objective, plan summary)
and what facts gathering learnt about its hosts."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune.store.lines import dumps, now
from bwtune.store.schema import transaction


def record_run(
    conn: sqlite3.Connection,
    run_id: str,
    *,
    matrix: Mapping[str, Any] | None = None,
    objective: Mapping[str, Any] | None = None,
    plan_summary: Mapping[str, Any] | None = None,
    created_at: str | None = None,
) -> None:
    """Create or update a run with its matrix, objective and plan summary.

    The objective comes from `objective`, else the matrix (its `objective`, or the
    contract's default on its first workload), else the node's summary's. Fields not given
    keep their old value.
    """
    contract.check_run_id(run_id)
    if objective is not None:
        resolved: dict[str, Any] | None = contract.normalize_objective(objective)
    elif matrix is not None:
        resolved = contract.objective_of(matrix)
    elif plan_summary is not None and isinstance(plan_summary.get("objective"), Mapping):
        resolved = contract.normalize_objective(plan_summary["objective"])
    else:
        resolved = None
    with transaction(conn):
        ensure_run(conn, run_id, created_at)
        if matrix is not None:
            # Not key-sorted: the matrix's own order of axes and workloads is the report's order.
            conn.execute("UPDATE runs SET matrix_json = ? WHERE run_id = ?", (json.dumps(matrix), run_id))
        if resolved is not None:
            conn.execute("UPDATE runs SET objective_json = ? WHERE run_id = ?", (dumps(resolved), run_id))
        if plan_summary is not None:
            conn.execute(
                "UPDATE runs SET plan_summary_json = ? WHERE run_id = ?", (dumps(plan_summary), run_id)
            )


def record_host_facts(
    conn: sqlite3.Connection,
    run_id: str,
    host: str,
    *,
    gpu: str | None = None,
    gpu_facts: Mapping[str, Any] | None = None,
    stack_fingerprint: str | None = None,
    stack: Mapping[str, Any] | None = None,
) -> None:
    """Store what facts gathering learnt about a host (GPUs, software stack) for a run."""
    with transaction(conn):
        ensure_run(conn, run_id, None)
        if stack_fingerprint:
            version = (stack or {}).get("sglang_version")
            ensure_stack(conn, stack_fingerprint, version if isinstance(version, str) else None)
            if stack is not None:
                conn.execute(
                    "UPDATE stacks SET details_json = ? WHERE fingerprint = ?",
                    (dumps(stack), stack_fingerprint),
                )
        ensure_host(conn, run_id, host, gpu, stack_fingerprint)
        if gpu_facts is not None:
            conn.execute(
                "UPDATE hosts SET gpu_facts_json = ? WHERE run_id = ? AND host = ?",
                (dumps(gpu_facts), run_id, host),
            )


def gpu_facts_summary(bwtune_gpu: Mapping[str, Any]) -> dict[str, Any]:
    """What the results database keeps of a host's `bwtune_gpu` (bwtune.sglang.gpu_facts,
    docs/facts.md) for reports: the GPUs in one line, their count, SM tag, memory, driver,
    CUDA and interconnect (not every GPU's processes and PCIe details)."""
    gpus = [gpu for gpu in bwtune_gpu.get("gpus") or [] if isinstance(gpu, Mapping)]
    first = gpus[0] if gpus else {}
    summary = {
        "gpus": bwtune_gpu.get("message"),
        "count": bwtune_gpu.get("count"),
        "sm": bwtune_gpu.get("sm"),
        "memory_mib": first.get("memory_total_mib"),
        "driver": bwtune_gpu.get("driver_version"),
        "cuda": bwtune_gpu.get("cuda_version"),
        "interconnect": bwtune_gpu.get("interconnect"),
    }
    return {key: value for key, value in summary.items() if value not in (None, "", [], {})}


def record_gathered_facts(conn: sqlite3.Connection, run_id: str, gpu_facts: Mapping[str, Any]) -> None:
    """Keep each host's gathered `bwtune_gpu` (host -> facts, as the sweep's gpu_facts task
    returned them) with the run, so its report shows them."""
    for host, facts in sorted(gpu_facts.items()):
        if isinstance(facts, Mapping) and facts.get("available"):
            record_host_facts(conn, run_id, host, gpu_facts=gpu_facts_summary(facts))


def ensure_run(conn: sqlite3.Connection, run_id: str, created_at: str | None) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO runs (run_id, created_at, objective_json) VALUES (?, ?, ?)",
        (run_id, created_at or now(), dumps(contract.normalize_objective(None))),
    )
    if created_at:  # a run starts when its earliest result started
        conn.execute(
            "UPDATE runs SET created_at = ? WHERE run_id = ? AND created_at > ?",
            (created_at, run_id, created_at),
        )


def ensure_stack(conn: sqlite3.Connection, fingerprint: str, sglang_version: str | None) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO stacks (fingerprint, sglang_version) VALUES (?, ?)",
        (fingerprint, sglang_version),
    )
    if sglang_version:
        conn.execute(
            "UPDATE stacks SET sglang_version = ? WHERE fingerprint = ? AND sglang_version IS NULL",
            (sglang_version, fingerprint),
        )


def ensure_host(
    conn: sqlite3.Connection, run_id: str, host: str, gpu: str | None, fingerprint: str | None
) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO hosts (run_id, host, gpu, stack_fingerprint) VALUES (?, ?, ?, ?)",
        (run_id, host, gpu, fingerprint),
    )
    conn.execute(
        "UPDATE hosts SET gpu = COALESCE(gpu, ?), stack_fingerprint = COALESCE(stack_fingerprint, ?) "
        "WHERE run_id = ? AND host = ?",
        (gpu, fingerprint, run_id, host),
    )
