"""Results lines for regression tests: configs measured over several runs and launches.

Numbers follow the stand-in's noise model (docs/standin.md): a launch is a little faster or
slower as a whole (cv 2%), repetitions inside it vary much less. Seeded: every test sees
the same runs.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import results_db

WORKLOAD = "chat"
OBJECTIVE = {"workload": WORKLOAD, "metric": "output_throughput", "goal": "max"}
CONFIGS = {
    "cprod000001": {"moe-runner-backend": "flashinfer_cutlass", "tp-size": 8},
    "calt0000002": {"moe-runner-backend": "triton", "tp-size": 8},
}
STACK = {
    "fingerprint": "fp-aaaa",
    "torch": "2.11.0.dev20261128+cu130",
    "cuda": "13.0",
    "sglang": "0.5.23",
    "sglang_commit": "0a1b2c3",
    "sgl_kernel": "0.3.21",
    "sgl_kernel_build": "sm_120a; fp4 ops: cutlass_fp4_group_mm",
    "flashinfer": "0.5.3",
    "driver": "580.95.05",
}


def stack(**changes: str) -> dict[str, Any]:
    changed = {**STACK, **changes}
    changed["fingerprint"] = "fp-" + str(abs(hash(tuple(sorted(changed.items())))) % 10**8)
    return changed


def launch_values(level: float, rng: random.Random, repetitions: int = 3, cv: float = 0.02) -> list[float]:
    factor = rng.gauss(1.0, cv)
    return [level * factor * rng.gauss(1.0, 0.003) for _ in range(repetitions)]


def line(
    run_id: str,
    config_id: str,
    day: int,
    values: Sequence[float] | None,
    *,
    status: str = "ok",
    stack_components: Mapping[str, Any] = STACK,
    host: str = "node1",
) -> dict[str, Any]:
    started = f"2026-11-{day:02d}T02:00:00+00:00"
    metrics = {}
    failure = None
    if values:
        # Latencies follow the throughput (a slower decode is a longer ITL and TTFT).
        reps = [
            {
                "output_throughput": v,
                "median_ttft_ms": 3e5 / v,
                "median_itl_ms": 2e4 / v,
                "p99_itl_ms": 4e4 / v,
            }
            for v in values
        ]
        metrics[WORKLOAD] = {
            "n": len(values),
            "values": {k: sum(r[k] for r in reps) / len(reps) for k in reps[0]},
            "ci95": {},
            "cv": {},
            "repetitions": reps,
        }
    if status != "ok":
        failure = contract.make_failure(status, f"the server {status}", ["boom"])
    return contract.make_line(
        run_id=run_id, host=host, config_id=config_id, flags=CONFIGS.get(config_id, {}), status=status,
        simulated=True, stack_fingerprint=stack_components["fingerprint"], stack=dict(stack_components),
        gpu="sm120", sglang_version=stack_components["sglang"], started_at=started, finished_at=started,
        metrics=metrics, failure=failure,
    )  # fmt: skip


def store_run(
    conn: sqlite3.Connection,
    run_id: str,
    day: int,
    levels: Mapping[str, float | str],
    *,
    launches: int = 8,
    seed: int = 0,
    stack_components: Mapping[str, Any] = STACK,
    cv: float = 0.02,
    tag: bool = True,
    failed: Mapping[tuple[str, int], str] | None = None,
) -> None:
    """One regression run: each config launched `launches` times (later launches supersede
    earlier ones, as the forced repetitions of `bwtune regress` do). A level that is a string
    is a failure class; `failed` fails single launches: (config id, launch number from 1) ->
    failure class."""
    rng = random.Random(seed)
    results_db.record_run(conn, run_id, objective=OBJECTIVE, created_at=f"2026-11-{day:02d}T02:00:00+00:00")
    for number in range(launches):
        lines = []
        for config_id, level in levels.items():
            status = level if isinstance(level, str) else (failed or {}).get((config_id, number + 1))
            if status is not None:
                lines.append(
                    line(run_id, config_id, day, None, status=status, stack_components=stack_components)
                )
            else:
                values = launch_values(level, rng, cv=cv)
                lines.append(line(run_id, config_id, day, values, stack_components=stack_components))
            lines[-1]["finished_at"] = f"2026-11-{day:02d}T02:{number:02d}:00+00:00"
        results_db.import_results(conn, lines)
    if tag:
        results_db.tag_run(conn, run_id, "regression")
