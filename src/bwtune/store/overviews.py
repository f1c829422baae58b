"""Runs at a glance, by a fixed number of queries whatever their number and size: result
counts, the best config (pick_best's pooled ranking, in SQL), the keys a paged report shows."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_fields
from bwtune.store.dialect import Dialect, dialect_of

# A config's id as the `--json` outputs name it ("id").
ID = str(results_fields.BY_NAME["config_id"].json)


def list_runs(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """One summary row per run, newest first. `failed` counts launched configs that failed;
    pruned and duplicate configs are `not_launched`, never failures. A few queries for all
    runs together (run_overviews), whatever their size."""
    runs = []
    for overview in run_overviews(conn):
        counts = overview["counts"]
        objective = dict(overview["objective"])
        runs.append(
            {
                "run_id": overview["run_id"],
                "created_at": overview["created_at"],
                "hosts": overview["hosts"],
                "results": overview["results"],
                "ok": counts["ok"],
                "failed": sum(counts["failed"].values()),
                "not_launched": sum(counts["not_launched"].values()),
                "simulated": overview["simulated"],
                "objective": objective,
                "best": overview["best"],
            }
        )
    return runs


def whole_run_summary(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """build_run_output's counts over every result of a run, by query."""
    [overview] = run_overviews(conn, [run_id])
    configs, launched = conn.execute(
        "SELECT COUNT(DISTINCT config_id), COUNT(*) FILTER (WHERE status NOT IN (?, ?)) FROM results "
        "WHERE run_id = ?",
        (*contract.NOT_LAUNCHED, run_id),
    ).fetchone()
    hosts = [
        row[0]
        for row in conn.execute("SELECT DISTINCT host FROM results WHERE run_id = ? ORDER BY host", (run_id,))
    ]
    workloads = [
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT workload FROM workload_values WHERE run_id = ? ORDER BY workload", (run_id,)
        )
    ]
    counts = overview["counts"]
    return {
        "results": overview["results"], "configs": configs, "launched": launched, "ok": counts["ok"],
        "failed": counts["failed"], "not_launched": counts["not_launched"],
        "screened_out": counts["screened_out"], "hosts": hosts, "workloads": workloads,
        "simulated": overview["simulated"],
    }  # fmt: skip


# The objective of each run (MATERIALIZED: computed once, not once per launch), its workload
# resolved as resolved_objective does, then every
# launch (current and superseded lines) with the value it competes with, and per launch key
# (host, config id, stack: results_contract.launch_key) the mean of those values and whether
# the launch is the key's last: pick_best, in SQL.
def _ranked_launches(sql: Dialect, runs: str) -> str:
    value = sql.json_value("w.values_json", "o.metric")
    earlier = sql.json_value("s.line_json", "'metrics'", "o.workload", "'values'", "o.metric")
    return f"""
WITH obj AS MATERIALIZED (
    SELECT r.run_id,
           COALESCE(NULLIF({sql.json_text("r.objective_json", "workload")}, ''),
                    (SELECT MIN(w.workload) FROM workload_values w WHERE w.run_id = r.run_id)) AS workload,
           COALESCE(NULLIF({sql.json_text("r.objective_json", "metric")}, ''), 'output_throughput') AS metric,
           CASE {sql.json_text("r.objective_json", "goal")} WHEN 'min' THEN -1.0 ELSE 1.0 END AS sign
    FROM runs r WHERE {runs}
),
launches AS (
    SELECT res.run_id, res.host, res.config_id, COALESCE(res.stack_fingerprint, 'None') AS fp,
           res.status, COALESCE(res.finished_at, '') AS fin, 0 AS later, res.attempt,
           CASE WHEN res.status = 'ok' THEN {value} END AS value
    FROM obj o JOIN results res ON res.run_id = o.run_id
    LEFT JOIN workload_values w ON w.run_id = res.run_id AND w.host = res.host
         AND w.config_id = res.config_id AND w.workload = o.workload
    UNION ALL
    SELECT s.run_id, s.host, s.config_id,
           COALESCE({sql.json_text("s.line_json", "stack_fingerprint")}, 'None'),
           s.status, COALESCE(s.finished_at, ''), 1, s.attempt,
           CASE WHEN s.status = 'ok' THEN {earlier} END
    FROM obj o JOIN superseded_results s ON s.run_id = o.run_id
),
ranked AS (
    SELECT l.*, o.sign,
           AVG(CASE WHEN {sql.is_number("l.value")} THEN {sql.number("l.value")} END)
               OVER (PARTITION BY l.run_id, l.host, l.config_id, l.fp) AS mean,
           ROW_NUMBER() OVER (PARTITION BY l.run_id, l.host, l.config_id, l.fp
                              ORDER BY l.fin DESC, l.later DESC, l.attempt DESC) AS recency
    FROM launches l JOIN obj o USING (run_id)
)
"""


def _runs_clause(run_ids: Sequence[str] | None) -> tuple[str, list[str]]:
    if run_ids is None:
        return "1 = 1", []
    return f"r.run_id IN ({', '.join('?' for _ in run_ids)})", list(run_ids)


def run_overviews(conn: sqlite3.Connection, run_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per run (all, or `run_ids`), by a few queries whatever its size: its result counts
    (results_contract.outcome_counts's shape), whether any is simulated, its hosts, its
    objective and its best config (pick_best's, by the pooled mean of its launches), newest
    first. Never loads the results themselves."""
    runs_where, params = _runs_clause(run_ids)
    workload = dialect_of(conn).json_text("r.objective_json", "workload")
    out: dict[str, dict[str, Any]] = {}
    for row in conn.execute(
        f"""SELECT r.run_id, r.created_at, r.objective_json,
                  (SELECT COUNT(DISTINCT host) FROM hosts h WHERE h.run_id = r.run_id) AS hosts,
                  CASE WHEN COALESCE({workload}, '') = '' THEN
                      (SELECT MIN(w.workload) FROM workload_values w WHERE w.run_id = r.run_id) END AS first
           FROM runs r WHERE {runs_where} ORDER BY r.created_at DESC, r.run_id""",
        params,
    ):
        objective = json.loads(row["objective_json"])
        if not objective.get("workload"):  # resolved_objective's: the first workload measured
            objective["workload"] = row["first"]
        out[row["run_id"]] = {
            "run_id": row["run_id"], "created_at": row["created_at"], "hosts": row["hosts"], "results": 0,
            "counts": {"ok": 0, "screened_out": 0, "failed": {}, "not_launched": {}},
            "simulated": False, "objective": objective, "best": None,
        }  # fmt: skip
    if not out:
        return []
    for row in conn.execute(
        f"""SELECT res.run_id, res.status, res.screened_out, MAX(res.simulated) AS simulated, COUNT(*) AS n
           FROM results res JOIN runs r USING (run_id) WHERE {runs_where}
           GROUP BY res.run_id, res.status, res.screened_out""",
        params,
    ):
        entry = out[row["run_id"]]
        counts = entry["counts"]
        entry["results"] += row["n"]
        entry["simulated"] = entry["simulated"] or bool(row["simulated"])
        status = row["status"]
        if status == contract.OK:
            counts["ok"] += row["n"]
            counts["screened_out"] += row["n"] if row["screened_out"] else 0
        else:
            group = counts["not_launched"] if status in contract.NOT_LAUNCHED else counts["failed"]
            group[status] = group.get(status, 0) + row["n"]
    for entry in out.values():
        for name in ("failed", "not_launched"):
            entry["counts"][name] = dict(sorted(entry["counts"][name].items()))
    best_sql = (
        _ranked_launches(dialect_of(conn), runs_where)
        + """
        , best AS (
            SELECT run_id, host, config_id, mean,
                   ROW_NUMBER() OVER (PARTITION BY run_id
                                      ORDER BY sign * mean DESC, host, config_id, fp) AS place
            FROM ranked WHERE recency = 1 AND status = 'ok' AND mean IS NOT NULL
        )
        SELECT run_id, host, config_id, mean FROM best WHERE place = 1"""
    )
    for row in conn.execute(best_sql, params):
        out[row["run_id"]]["best"] = {ID: row["config_id"], "host": row["host"], "objective": row["mean"]}
    return list(out.values())


def report_keys(conn: sqlite3.Connection, run_id: str, *, top: int, per_status: int) -> list[tuple[str, str]]:
    """The (host, config id)s a report of a big run shows: its `top` ok results by the value
    they are ranked with (the best among them) and the first `per_status` results of every
    other status (by host, config id). By query: the run's other results are never read."""
    runs_where, params = _runs_clause([run_id])
    chosen: dict[tuple[str, str], None] = {}
    for row in conn.execute(
        _ranked_launches(dialect_of(conn), runs_where)
        + """SELECT host, config_id FROM ranked WHERE later = 0 AND status = 'ok'
             ORDER BY mean IS NULL, sign * mean DESC, host, config_id LIMIT ?""",
        (*params, top),
    ):
        chosen[(row["host"], row["config_id"])] = None
    for row in conn.execute(
        """SELECT host, config_id FROM (
               SELECT host, config_id, ROW_NUMBER() OVER (PARTITION BY status ORDER BY host, config_id) AS n
               FROM results WHERE run_id = ? AND status != 'ok') AS numbered
           WHERE n <= ?""",
        (run_id, per_status),
    ):
        chosen[(row["host"], row["config_id"])] = None
    [overview] = run_overviews(conn, [run_id])
    if overview["best"] is not None:
        chosen[(overview["best"]["host"], overview["best"][ID])] = None
    return list(chosen)
