"""Reading results back: a run, its lines as the node wrote them, its superseded lines, its
hosts, and the few facts commands ask of the database (every query is here, in the store)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune.store import lines
from bwtune.store.dialect import dialect_of
from bwtune.store.errors import UnknownRunError
from bwtune.store.lines import loads


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    created_at: str
    objective: dict[str, Any]
    matrix: dict[str, Any] | None
    plan_summary: dict[str, Any] | None


def get_run(conn: sqlite3.Connection, run_id: str) -> RunInfo:
    row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        raise UnknownRunError(f"no run {run_id!r} in the results database")
    objective = json.loads(row["objective_json"])
    return RunInfo(
        run_id=row["run_id"],
        created_at=row["created_at"],
        objective=objective,
        matrix=loads(row["matrix_json"]),
        plan_summary=loads(row["plan_summary_json"]),
    )


def resolved_objective(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """The run's objective with its workload filled in (first workload measured if unset)."""
    objective = dict(get_run(conn, run_id).objective)
    if not objective.get("workload"):
        row = conn.execute(
            "SELECT workload FROM workload_values WHERE run_id = ? ORDER BY workload LIMIT 1", (run_id,)
        ).fetchone()
        objective["workload"] = row[0] if row else None
    return objective


def run_results(
    conn: sqlite3.Connection, run_id: str, keys: Sequence[tuple[str, str]] | None = None
) -> list[dict[str, Any]]:
    """The run's results lines as the node wrote them (contract shape, every field the node
    wrote, fields unknown to this bwtune included), ordered by host, config; only those of
    `keys` ((host, config id) pairs) when given."""
    get_run(conn, run_id)
    where, params = keys_filter(keys, "res")
    rows = conn.execute(
        f"""SELECT res.*, {lines.CONFIG_SELECT},
                  f.class AS failure_class, f.message AS failure_message, f.log_tail_json
           FROM results res JOIN configs c USING (config_id)
           LEFT JOIN failures f USING (run_id, host, config_id)
           WHERE res.run_id = ?{where} ORDER BY res.host, res.config_id""",
        (run_id, *params),
    ).fetchall()
    metrics = _metrics_by_result(conn, run_id, keys)
    records = []
    for row in rows:
        failure = lines.failure_from_row(row)
        columns = lines.line_from_row(row, metrics.get((row["host"], row["config_id"]), {}), failure)
        # The whole line as imported (schema 2+) keeps what no column holds, and its own
        # flags, argv and point: a config id is shared by every run with the same flags,
        # whatever model path or point its argv has (the configs row is the first seen).
        stored = loads(row["line_json"]) or {}
        own = {key: stored[key] for key in ("flags", "argv", "point", "metrics") if key in stored}
        if failure is not None and isinstance(stored.get("failure"), dict):
            own["failure"] = {**stored["failure"], **failure}  # its log_path, the node's log of it
        records.append({**stored, **columns, **own})
    return records


def superseded_results(
    conn: sqlite3.Connection, run_id: str, keys: Sequence[tuple[str, str]] | None = None
) -> list[dict[str, Any]]:
    """Earlier measurements of re-measured configs, oldest first, each with its `attempt`
    (only those of `keys`, (host, config id) pairs, when given)."""
    get_run(conn, run_id)
    where, params = keys_filter(keys)
    return [
        {**json.loads(row["line_json"]), "attempt": row["attempt"], "superseded_at": row["superseded_at"]}
        for row in conn.execute(
            f"SELECT * FROM superseded_results WHERE run_id = ?{where} ORDER BY host, config_id, attempt",
            (run_id, *params),
        )
    ]


def launched_lines(conn: sqlite3.Connection, gpu: str) -> list[dict[str, Any]]:
    """Every launch of a hardware group (lines whose `gpu` is `gpu`) in every run, earlier
    measurements of re-measured configs included: what a plan's cost estimate learns from.
    Lines imported before the database kept whole lines carry status, simulated and timings."""
    lines = []
    for row in conn.execute(
        "SELECT status, simulated, timings_json, line_json FROM results WHERE gpu = ?", (gpu,)
    ):
        if contract.is_launched(row["status"]):
            stored = loads(row["line_json"])
            lines.append(stored if isinstance(stored, dict) else {
                "status": row["status"], "simulated": bool(row["simulated"]),
                "timings": json.loads(row["timings_json"]), "gpu": gpu,
            })  # fmt: skip
    for row in conn.execute("SELECT line_json FROM superseded_results"):
        stored = json.loads(row["line_json"])
        launched = isinstance(stored, dict) and contract.is_launched(stored.get("status"))
        if launched and stored.get("gpu") == gpu:
            lines.append(stored)
    return lines


def _metrics_by_result(
    conn: sqlite3.Connection, run_id: str, keys: Sequence[tuple[str, str]] | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """The metric blocks of results imported before schema 2 kept whole lines (the others'
    are in their stored line)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    where, params = keys_filter(keys)
    for row in conn.execute(
        "SELECT host, config_id, workload, block_json FROM workload_values "
        f"WHERE run_id = ? AND block_json IS NOT NULL{where} ORDER BY host, config_id, workload",
        (run_id, *params),
    ):
        out.setdefault((row["host"], row["config_id"]), {})[row["workload"]] = json.loads(row["block_json"])
    return out


def keys_filter(keys: Sequence[tuple[str, str]] | None, table: str = "") -> tuple[str, list[str]]:
    """` AND (host, config_id) IN (...)` for a chosen few (host, config id) of a run."""
    if keys is None:
        return "", []
    if not keys:
        return " AND 1 = 0", []
    prefix = f"{table}." if table else ""
    values = ", ".join("(?, ?)" for _ in keys)
    # IN (SELECT ... FROM (VALUES ...)): SQLite looks each pair up in the primary key; a bare
    # IN (VALUES ...) would scan every row of the run. (PostgreSQL names VALUES' columns so too.)
    return (
        f" AND ({prefix}host, {prefix}config_id) IN "
        f"(SELECT column1, column2 FROM (VALUES {values}) AS picked)",
        [v for key in keys for v in key],
    )


def run_hosts(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """Hosts of a run with their GPU facts and stack (fingerprint, version, details)."""
    rows = conn.execute(
        """SELECT h.host, h.gpu, h.gpu_facts_json, h.stack_fingerprint, s.sglang_version, s.details_json
           FROM hosts h LEFT JOIN stacks s ON s.fingerprint = h.stack_fingerprint
           WHERE h.run_id = ? ORDER BY h.host""",
        (run_id,),
    ).fetchall()
    return [
        {
            "host": row["host"],
            "gpu": row["gpu"],
            "gpu_facts": loads(row["gpu_facts_json"]),
            "stack_fingerprint": row["stack_fingerprint"],
            "sglang_version": row["sglang_version"],
            "stack": loads(row["details_json"]),
        }
        for row in rows
    ]


def result_attempts(
    conn: sqlite3.Connection, run_id: str, keys: Sequence[tuple[str, str]] | None = None
) -> dict[tuple[str, str], int]:
    """(host, config id) -> the attempt of its current line (1, or more for a re-measured
    config), for the run's results (those of `keys` when given)."""
    where, params = keys_filter(keys)
    return {
        (row["host"], row["config_id"]): row["attempt"]
        for row in conn.execute(
            f"SELECT host, config_id, attempt FROM results WHERE run_id = ?{where}", (run_id, *params)
        )
    }


def result_count(conn: sqlite3.Connection, run_id: str) -> int:
    """How many results (current lines) a run has."""
    return int(conn.execute("SELECT COUNT(*) FROM results WHERE run_id = ?", (run_id,)).fetchone()[0])


def measured_objective(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """The objective the run's lines say they were measured for (the latest line that says
    one; lines of older nodes do not), or None."""
    sql = dialect_of(conn)
    row = conn.execute(
        f"""SELECT {sql.json_text("line_json", "objective")} FROM results
           WHERE run_id = ? AND {sql.json_type("line_json", "objective")} = 'object'
           ORDER BY finished_at DESC LIMIT 1""",
        (run_id,),
    ).fetchone()
    return json.loads(row[0]) if row else None


def runs_before(conn: sqlite3.Connection, run_id: str) -> list[str]:
    """The other runs created before `run_id` (every other run when it is not stored yet),
    oldest first."""
    this = conn.execute("SELECT created_at FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    created = this and this["created_at"]
    return [
        row["run_id"]
        for row in conn.execute(
            "SELECT run_id FROM runs WHERE run_id != ? AND (? IS NULL OR created_at < ?) "
            "ORDER BY created_at, run_id",
            (run_id, created, created),
        )
    ]


def superseded_count(conn: sqlite3.Connection, run_id: str) -> int:
    """How many earlier lines of re-measured configs a run keeps."""
    return int(
        conn.execute("SELECT COUNT(*) FROM superseded_results WHERE run_id = ?", (run_id,)).fetchone()[0]
    )
