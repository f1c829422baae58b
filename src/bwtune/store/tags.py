"""Run tags (`bwtune regress` tags its runs `regression`) and named baselines, each with who
set it, when and why."""

from __future__ import annotations

import sqlite3
from typing import Any

from bwtune.store.lines import now
from bwtune.store.queries import get_run
from bwtune.store.schema import transaction


def tag_run(conn: sqlite3.Connection, run_id: str, tag: str) -> None:
    get_run(conn, run_id)
    with transaction(conn):
        conn.execute("INSERT OR IGNORE INTO run_tags (run_id, tag) VALUES (?, ?)", (run_id, tag))


def run_tags(conn: sqlite3.Connection, run_id: str) -> list[str]:
    return [
        row[0] for row in conn.execute("SELECT tag FROM run_tags WHERE run_id = ? ORDER BY tag", (run_id,))
    ]


def tagged_runs(conn: sqlite3.Connection, tag: str) -> list[str]:
    """Run ids with the tag, oldest first."""
    return [
        row[0]
        for row in conn.execute(
            "SELECT r.run_id FROM runs r JOIN run_tags t USING (run_id) WHERE t.tag = ? "
            "ORDER BY r.created_at, r.run_id",
            (tag,),
        )
    ]


def set_baseline(conn: sqlite3.Connection, name: str, run_id: str, *, set_by: str, reason: str) -> None:
    """Name a run as a baseline (a name set again moves to the new run)."""
    get_run(conn, run_id)
    with transaction(conn):
        conn.execute(
            "INSERT OR REPLACE INTO baselines (name, run_id, set_by, set_at, reason) VALUES (?, ?, ?, ?, ?)",
            (name, run_id, set_by, now(), reason),
        )


def get_baseline(conn: sqlite3.Connection, name: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM baselines WHERE name = ?", (name,)).fetchone()
    return None if row is None else dict(row)


def list_baselines(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [dict(row) for row in conn.execute("SELECT * FROM baselines ORDER BY set_at DESC, name")]
