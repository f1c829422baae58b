"""Storing results lines: checked lines in, each (run, host, config) once; a re-measured
config's earlier line kept as superseded, never lost; a results file streamed in batches.

Every row comes from the field table (bwtune.store.lines): the INSERTs here never name a
line's columns.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune.store import lines, queries
from bwtune.store.dialect import dialect_of
from bwtune.store.files import iter_results_file
from bwtune.store.lines import Key, dumps, now
from bwtune.store.run_records import ensure_host, ensure_run, ensure_stack
from bwtune.store.schema import transaction


@dataclass(frozen=True)
class Replacement:
    """A re-measured config: its earlier line is kept (superseded_results), never lost."""

    run_id: str
    host: str
    config_id: str
    old_status: str
    new_status: str
    attempt: int  # the new line's attempt; attempts 1 .. attempt - 1 are kept as superseded

    def line(self) -> str:
        return (
            f"run {self.run_id}, {self.config_id} on {self.host}: {self.old_status} -> {self.new_status} "
            f"(attempt {self.attempt}; the earlier measurement is kept)"
        )


@dataclass(frozen=True)
class ImportSummary:
    added: int
    updated: int
    unchanged: int
    run_ids: tuple[str, ...]
    replaced: tuple[Replacement, ...] = ()
    warnings: tuple[str, ...] = ()  # import_results_file: lines skipped (a torn last line, ...)

    @property
    def total(self) -> int:
        return self.added + self.updated + self.unchanged


def import_results(
    conn: sqlite3.Connection,
    records: Iterable[Mapping[str, Any]],
    *,
    run_id: str | None = None,
) -> ImportSummary:
    """Load checked results lines; `run_id` overrides the run id in the lines.

    A line already stored with identical content is skipped. A changed line for the same
    (run, host, config), e.g. a config a `--force` sweep measured again, becomes the
    current one; the earlier one moves to `superseded_results` with its attempt number and
    is listed in the summary's `replaced`: no measurement is dropped silently.
    """
    if run_id is not None:
        contract.check_run_id(run_id, "--run-id")
    added = unchanged = 0
    replaced: list[Replacement] = []
    run_ids: dict[str, None] = {}
    with transaction(conn):
        for number, record in enumerate(records, start=1):
            record = dict(record)
            if run_id is not None:
                record["run_id"] = run_id
            contract.validate_line(record, f"result {number}")
            outcome = _import_one(conn, record)
            run_ids[record["run_id"]] = None
            if isinstance(outcome, Replacement):
                replaced.append(outcome)
            else:
                added += outcome == "added"
                unchanged += outcome == "unchanged"
    return ImportSummary(added, len(replaced), unchanged, tuple(run_ids), tuple(replaced))


def _import_one(conn: sqlite3.Connection, record: dict[str, Any]) -> str | Replacement:
    key: Key = (record["run_id"], record["host"], record["config_id"])
    text = dumps(record)
    digest = hashlib.sha256(text.encode()).hexdigest()
    existing = conn.execute(
        "SELECT line_sha256, attempt, status, finished_at FROM results "
        "WHERE run_id = ? AND host = ? AND config_id = ?",
        key,
    ).fetchone()
    if existing is not None and existing["line_sha256"] == digest:
        return "unchanged"
    # A results file holds every launch of a re-measured config (adaptive's finals): reading
    # it again must not swap the current line with one already kept as superseded.
    if existing is not None and any(
        hashlib.sha256(row["line_json"].encode()).hexdigest() == digest
        for row in conn.execute(
            "SELECT line_json FROM superseded_results WHERE run_id = ? AND host = ? AND config_id = ?", key
        )
    ):
        return "unchanged"
    if existing is not None and _earlier_launch(record, existing["finished_at"]):
        return _insert_earlier_launch(conn, key, record, existing["attempt"])
    attempt = 1
    if existing is not None:
        conn.execute(
            "INSERT OR REPLACE INTO superseded_results (run_id, host, config_id, attempt, status, "
            "finished_at, superseded_at, line_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*key, existing["attempt"], existing["status"], existing["finished_at"], now(),
             dumps(_stored_line(conn, key))),
        )  # fmt: skip
        conn.execute("DELETE FROM results WHERE run_id = ? AND host = ? AND config_id = ?", key)
        attempt = existing["attempt"] + 1

    ensure_run(conn, record["run_id"], record.get("started_at"))
    fingerprint = record.get("stack_fingerprint") or None
    if fingerprint:
        ensure_stack(conn, fingerprint, record.get("sglang_version"))
    ensure_host(conn, record["run_id"], record["host"], record.get("gpu"), fingerprint)
    conn.execute(lines.INSERT_CONFIG, lines.config_row(record))
    conn.execute(lines.INSERT_RESULT, lines.result_row(record, digest, attempt, text))
    conn.executemany(lines.INSERT_VALUES, lines.values_rows(key, record))
    failure = lines.failure_row(key, record)
    if failure is not None:
        conn.execute(lines.INSERT_FAILURE, failure)
    if existing is None:
        return "added"
    run_id, host, config_id = key
    return Replacement(run_id, host, config_id, existing["status"], record["status"], attempt)


def _earlier_launch(record: Mapping[str, Any], current_finished_at: str | None) -> bool:
    """Whether a line is a launch made before the stored current one (a re-measured config's
    first launch reaching the database after its second)."""
    finished = record.get("finished_at")
    return bool(finished and current_finished_at) and str(finished) < str(current_finished_at)


def _insert_earlier_launch(
    conn: sqlite3.Connection, key: Key, record: dict[str, Any], current_attempt: int
) -> str:
    """Keep an earlier launch as superseded in its place: attempts are renumbered in the
    order the launches finished, the current line stays current (its attempt one more)."""
    rows = conn.execute(
        "SELECT attempt, status, finished_at, superseded_at, line_json FROM superseded_results "
        "WHERE run_id = ? AND host = ? AND config_id = ? ORDER BY attempt",
        key,
    ).fetchall()
    launches = [(str(r["finished_at"] or ""), r["attempt"], r["status"], r["superseded_at"], r["line_json"])
                for r in rows]  # fmt: skip
    launches.append((str(record.get("finished_at") or ""), current_attempt, record["status"], now(),
                     dumps(record)))  # fmt: skip
    launches.sort(key=lambda launch: (launch[0], launch[1]))
    conn.execute("DELETE FROM superseded_results WHERE run_id = ? AND host = ? AND config_id = ?", key)
    for attempt, (finished_at, _old, status, superseded_at, line_json) in enumerate(launches, start=1):
        conn.execute(
            "INSERT INTO superseded_results (run_id, host, config_id, attempt, status, finished_at, "
            "superseded_at, line_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*key, attempt, status, finished_at or None, superseded_at, line_json),
        )
    conn.execute(
        "UPDATE results SET attempt = ? WHERE run_id = ? AND host = ? AND config_id = ?",
        (len(launches) + 1, *key),
    )
    return "added"


IMPORT_BATCH = 500  # lines parsed, then stored with one statement per table
IMPORT_CACHE_KIB = 128 * 1024  # SQLite's page cache while a file is imported


def import_results_file(
    conn: sqlite3.Connection,
    path: str | Path,
    *,
    run_id: str | None = None,
    skip_bad_lines: bool = False,
    batch: int = IMPORT_BATCH,
) -> ImportSummary:
    """Stream a node's results file into the database: read, check and store it line by
    line in batches, never the whole file or all its rows in memory (issue 21 #15).

    The rules are read_results_file's (a torn last line skipped with a warning, a damaged
    line raises ResultsFormatError naming it unless `skip_bad_lines`), and the outcome is
    import_results's: one transaction, so a damaged line stores nothing. Lines of
    (run, host, config)s not stored yet are inserted a batch at a time; a line for one
    already stored (unchanged, re-measured) goes through import_results's own path."""
    warnings: list[str] = []
    loader = _BatchLoader(conn)
    # One transaction of a big file inserts at random places of the primary-key indexes (config
    # ids are hashes): with SQLite's 2 MB default cache every insert spills pages to the WAL
    # again and again. IMPORT_CACHE_KIB holds those indexes (about 40 MB at 100,000 lines).
    # (A PostgreSQL server sizes its own cache.)
    sqlite = dialect_of(conn).name == "sqlite"
    previous = conn.execute("PRAGMA cache_size").fetchone()[0] if sqlite else None
    if sqlite:
        conn.execute(f"PRAGMA cache_size = -{IMPORT_CACHE_KIB}")
    try:
        _stream_into(conn, loader, path, run_id=run_id, skip_bad_lines=skip_bad_lines, batch=batch,
                     warnings=warnings)  # fmt: skip
    finally:
        if previous is not None:
            conn.execute(f"PRAGMA cache_size = {int(previous)}")
    return ImportSummary(loader.added, len(loader.replaced), loader.unchanged, tuple(loader.run_ids),
                         tuple(loader.replaced), tuple(warnings))  # fmt: skip


def _stream_into(
    conn: sqlite3.Connection,
    loader: _BatchLoader,
    path: str | Path,
    *,
    run_id: str | None,
    skip_bad_lines: bool,
    batch: int,
    warnings: list[str],
) -> None:
    with transaction(conn):
        pending: dict[Key, tuple[dict[str, Any], str]] = {}
        for record, text in iter_results_file(path, run_id=run_id, skip_bad_lines=skip_bad_lines,
                                              warnings=warnings):  # fmt: skip
            key = (record["run_id"], record["host"], record["config_id"])
            if key in pending:  # a re-measure in the same file: its first launch is stored first
                loader.store(pending)
                pending = {}
            pending[key] = (record, text)
            if len(pending) >= batch:
                loader.store(pending)
                pending = {}
        loader.store(pending)
        loader.finish()


class _BatchLoader:
    """Stores batches of checked lines; what one import has seen so far."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.added = self.unchanged = 0
        self.replaced: list[Replacement] = []
        self.run_ids: dict[str, None] = {}
        self._hosts: dict[tuple[str, str], tuple[bool, bool]] = {}  # GPU known, stack known
        self._stacks: set[tuple[str, str | None]] = set()
        self._configs: set[str] = set()
        self._started: dict[str, str | None] = {}

    def store(self, pending: Mapping[Key, tuple[dict[str, Any], str]]) -> None:
        if not pending:
            return
        stored = self._stored_digests(list(pending))
        fresh = []
        for key, (record, text) in pending.items():
            self.run_ids[key[0]] = None
            digest = hashlib.sha256(text.encode()).hexdigest()
            if key not in stored:
                fresh.append((key, record, text, digest))
            elif stored[key] == digest:
                self.unchanged += 1
            else:  # re-measured (or an earlier launch of one): import_results's own rules
                outcome = _import_one(self.conn, record)
                if isinstance(outcome, Replacement):
                    self.replaced.append(outcome)
                else:
                    self.added += outcome == "added"
                    self.unchanged += outcome == "unchanged"
        self._insert(fresh)

    def _stored_digests(self, keys: list[Key]) -> dict[Key, str]:
        found: dict[Key, str] = {}
        by_run: dict[str, list[tuple[str, str]]] = {}
        for run_id, host, config_id in keys:
            by_run.setdefault(run_id, []).append((host, config_id))
        for run_id, pairs in by_run.items():
            where, params = queries.keys_filter(pairs)
            for row in self.conn.execute(
                f"SELECT host, config_id, line_sha256 FROM results WHERE run_id = ?{where}", (run_id, *params)
            ):
                found[(run_id, row["host"], row["config_id"])] = row["line_sha256"]
        return found

    def _insert(self, fresh: list[tuple[Key, dict[str, Any], str, str]]) -> None:
        conn = self.conn
        configs, results, values, failures = [], [], [], []
        for key, record, text, digest in fresh:
            run_id, host, config_id = key
            started = record.get("started_at")
            if run_id not in self._started:
                ensure_run(conn, run_id, started)
                self._started[run_id] = started
            elif started and (self._started[run_id] is None or started < str(self._started[run_id])):
                self._started[run_id] = started
            fingerprint = record.get("stack_fingerprint") or None
            version = record.get("sglang_version")
            if fingerprint and (fingerprint, version) not in self._stacks:
                ensure_stack(conn, fingerprint, version)
                self._stacks.add((fingerprint, version))
            # As import_results: the first line that names a host's GPU (stack) sets it.
            known = self._hosts.get((run_id, host))
            gpu = record.get("gpu")
            if known is None or (gpu is not None and not known[0]) or (fingerprint and not known[1]):
                ensure_host(conn, run_id, host, gpu, fingerprint)
                was = known or (False, False)
                self._hosts[(run_id, host)] = (was[0] or gpu is not None, was[1] or bool(fingerprint))
            finite = lines.finite_line(text)  # its parts' rows may be encoded by orjson
            if config_id not in self._configs:
                configs.append(lines.config_row(record, finite=finite))
                self._configs.add(config_id)
            results.append(lines.result_row(record, digest, 1, text, finite=finite))
            values += lines.values_rows(key, record, finite=finite)
            failure = lines.failure_row(key, record, finite=finite)
            if failure is not None:
                failures.append(failure)
        conn.executemany(lines.INSERT_CONFIG, configs)
        conn.executemany(lines.INSERT_RESULT, results)
        conn.executemany(lines.INSERT_VALUES, values)
        conn.executemany(lines.INSERT_FAILURE, failures)
        self.added += len(fresh)

    def finish(self) -> None:
        """A run starts when its earliest result started."""
        for run_id, started in self._started.items():
            if started:
                ensure_run(self.conn, run_id, started)


def _stored_line(conn: sqlite3.Connection, key: Key) -> dict[str, Any]:
    """The stored line of one (run, host, config), as the node wrote it."""
    row = conn.execute(
        "SELECT line_json FROM results WHERE run_id = ? AND host = ? AND config_id = ?", key
    ).fetchone()
    if row is not None and row["line_json"] is not None:
        return dict(json.loads(row["line_json"]))
    # Imported before schema 2 kept whole lines: rebuild it from the columns.
    return next(
        line for line in queries.run_results(conn, key[0]) if (line["host"], line["config_id"]) == key[1:]
    )
