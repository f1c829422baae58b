"""The plan service: what one launch of a plan costs, from the database's measured launches
(`bwtune plan` shows it, `bwtune regress` estimates its run's length from it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import Plan
from bwtune import launch_cost, store


def estimate_cost(result: Plan, db: Path | None) -> launch_cost.LaunchCost:
    """The cost of one launch: from the database's measured launches on the plan's GPU, else
    the matrix's estimates. A database that cannot be read is said on stderr, never fatal."""
    est = result.summary["estimate"]
    matrix_startup_s = float(est["startup_s"])
    matrix_workload_s = float(est["per_launch_s"]) - matrix_startup_s
    lines: list[dict[str, Any]] = []
    path = db if db is not None else store.default_db_path()
    if path.is_file():
        try:
            conn = store.connect_readonly(path)  # planning never creates or changes a database
            try:
                lines = store.launched_lines(conn, str(result.gpu))
            finally:
                conn.close()
        except (store.SchemaTooNewError, *store.DB_INPUT_ERRORS) as err:
            print(f"bwtune plan: {path}: {err}; estimating from the matrix", file=sys.stderr)
    workloads = [str(w.get("name")) for w in (result.launches[0]["workloads"] if result.launches else [])]
    return launch_cost.estimate(
        lines, workloads, matrix_startup_s=matrix_startup_s, matrix_workload_s=matrix_workload_s
    )
