"""The controller's results database: every run, host, config and measurement, in SQLite.

Nodes write one JSON line per config (the results file contract in docs/architecture.md);
`import_results` loads those lines here. Importing the same lines twice changes nothing,
and lines from several hosts of one run merge into that run. The schema is versioned with
`PRAGMA user_version` and upgraded by the ordered `MIGRATIONS` below.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS_SCHEMA = 1
FAILURE_CLASSES = (
    "pruned",
    "duplicate",
    "invalid-args",
    "unsupported-hardware",
    "oom",
    "startup-timeout",
    "crashed",
    "wrong-output",
)
STATUSES = ("ok", *FAILURE_CLASSES)
DEFAULT_OBJECTIVE = {"workload": None, "metric": "output_throughput", "goal": "max"}
_REQUIRED_KEYS = ("schema", "run_id", "host", "config_id", "flags", "status", "metrics")


class ResultsFormatError(ValueError):
    """A results line breaks the contract; the message names the file, line and value."""


class UnknownRunError(LookupError):
    """No run with that id in the database."""


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer bwtune."""


# --------------------------------------------------------------------------- paths


def bwtune_home() -> Path:
    """The runs directory's parent: $BWTUNE_HOME, else ~/.local/share/bwtune."""
    env = os.environ.get("BWTUNE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".local" / "share" / "bwtune"


def default_db_path() -> Path:
    """$BWTUNE_DB if set, else results.db next to the runs directory."""
    env = os.environ.get("BWTUNE_DB")
    return Path(env).expanduser() if env else bwtune_home() / "results.db"


def run_dir(run_id: str) -> Path:
    return bwtune_home() / "runs" / run_id


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """The `--db PATH` option every command that reads or writes results shares."""
    parser.add_argument(
        "--db", metavar="PATH", type=Path, default=None,
        help="results database (default: $BWTUNE_DB, else $BWTUNE_HOME/results.db, "
        "else ~/.local/share/bwtune/results.db)",
    )  # fmt: skip


# Errors a command reports as one line with exit code 2 (bad input).
DB_INPUT_ERRORS = (sqlite3.DatabaseError, OSError)


# --------------------------------------------------------------------------- schema

# Each entry upgrades the schema by one version; never edit a released entry, append one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            matrix_json TEXT,
            objective_json TEXT NOT NULL,
            plan_summary_json TEXT
        )""",
        """CREATE TABLE stacks (
            fingerprint TEXT PRIMARY KEY,
            sglang_version TEXT,
            details_json TEXT
        )""",
        """CREATE TABLE hosts (
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            host TEXT NOT NULL,
            gpu TEXT,
            gpu_facts_json TEXT,
            stack_fingerprint TEXT REFERENCES stacks(fingerprint),
            PRIMARY KEY (run_id, host)
        )""",
        """CREATE TABLE configs (
            config_id TEXT PRIMARY KEY,
            flags_json TEXT NOT NULL,
            argv_json TEXT NOT NULL,
            point_json TEXT NOT NULL
        )""",
        # One row per config measured on a host in a run; line_sha256 makes re-imports no-ops.
        """CREATE TABLE results (
            run_id TEXT NOT NULL,
            host TEXT NOT NULL,
            config_id TEXT NOT NULL REFERENCES configs(config_id),
            status TEXT NOT NULL,
            simulated INTEGER NOT NULL,
            stack_fingerprint TEXT,
            gpu TEXT,
            sglang_version TEXT,
            started_at TEXT,
            finished_at TEXT,
            timings_json TEXT NOT NULL,
            accept_length REAL,
            reasons_json TEXT NOT NULL,
            line_sha256 TEXT NOT NULL,
            PRIMARY KEY (run_id, host, config_id),
            FOREIGN KEY (run_id, host) REFERENCES hosts(run_id, host) ON DELETE CASCADE
        )""",
        """CREATE TABLE metric_summaries (
            run_id TEXT NOT NULL,
            host TEXT NOT NULL,
            config_id TEXT NOT NULL,
            workload TEXT NOT NULL,
            metric TEXT NOT NULL,
            n INTEGER,
            value REAL,
            ci_low REAL,
            ci_high REAL,
            cv REAL,
            PRIMARY KEY (run_id, host, config_id, workload, metric),
            FOREIGN KEY (run_id, host, config_id)
                REFERENCES results(run_id, host, config_id) ON DELETE CASCADE
        )""",
        """CREATE TABLE measurements (
            run_id TEXT NOT NULL,
            host TEXT NOT NULL,
            config_id TEXT NOT NULL,
            workload TEXT NOT NULL,
            metric TEXT NOT NULL,
            repetition INTEGER NOT NULL,
            value REAL,
            PRIMARY KEY (run_id, host, config_id, workload, metric, repetition),
            FOREIGN KEY (run_id, host, config_id)
                REFERENCES results(run_id, host, config_id) ON DELETE CASCADE
        )""",
        """CREATE TABLE failures (
            run_id TEXT NOT NULL,
            host TEXT NOT NULL,
            config_id TEXT NOT NULL,
            class TEXT NOT NULL,
            message TEXT NOT NULL,
            log_tail_json TEXT NOT NULL,
            PRIMARY KEY (run_id, host, config_id),
            FOREIGN KEY (run_id, host, config_id)
                REFERENCES results(run_id, host, config_id) ON DELETE CASCADE
        )""",
        "CREATE INDEX failures_by_class ON failures(run_id, class)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: str | Path | None = None) -> sqlite3.Connection:
    """Open (creating if needed) the results database in WAL mode and migrate it."""
    db_path = Path(path) if path is not None else default_db_path()
    if str(db_path) != ":memory:":
        db_path.parent.mkdir(parents=True, exist_ok=True)
    # Autocommit mode: transactions are explicit (`_transaction`), DDL included.
    conn = sqlite3.connect(str(db_path), isolation_level=None, timeout=10.0)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")
    migrate(conn)
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Apply the migrations this database lacks, each atomically; return the new version."""
    with _transaction(conn):
        current = schema_version(conn)
        if current > SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"results database schema version {current} is newer than this bwtune "
                f"understands ({SCHEMA_VERSION}); upgrade bwtune"
            )
        for version in range(current, SCHEMA_VERSION):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
    return schema_version(conn)


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# --------------------------------------------------------------------------- reading lines


def read_results_file(path: str | Path) -> list[dict[str, Any]]:
    """Parse and check a results JSONL file; blank lines are skipped."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultsFormatError(f"{source}: cannot read results file: {exc.strerror}") from None
    return parse_results_lines(text.splitlines(), source=str(source))


def parse_results_lines(lines: Iterable[str], source: str = "<results>") -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResultsFormatError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        validate_result(record, where)
        records.append(record)
    return records


def validate_result(record: Any, where: str = "<result>") -> None:
    """Raise ResultsFormatError naming the first contract violation in one results line."""
    if not isinstance(record, dict):
        raise ResultsFormatError(
            f"{where}: a results line must be a JSON object, got {type(record).__name__}"
        )
    for key in _REQUIRED_KEYS:
        if key not in record:
            raise ResultsFormatError(f"{where}: missing key {key!r}")
    if record["schema"] != RESULTS_SCHEMA:
        raise ResultsFormatError(
            f"{where}: schema {record['schema']!r} is not supported (expected {RESULTS_SCHEMA})"
        )
    for key in ("run_id", "host", "config_id"):
        if not isinstance(record[key], str) or not record[key]:
            raise ResultsFormatError(f"{where}: {key} must be a non-empty string, got {record[key]!r}")
    status = record["status"]
    if status not in STATUSES:
        raise ResultsFormatError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}")
    if not isinstance(record["flags"], dict):
        raise ResultsFormatError(f"{where}: flags must be an object")
    metrics = record["metrics"]
    if not isinstance(metrics, dict):
        raise ResultsFormatError(f"{where}: metrics must be an object keyed by workload")
    for workload, block in metrics.items():
        _validate_metric_block(block, f"{where}: metrics[{workload!r}]")
    failure = record.get("failure")
    if status != "ok":
        if not isinstance(failure, dict) or "class" not in failure:
            raise ResultsFormatError(f"{where}: status {status!r} needs a failure object with a class")
        if failure["class"] != status:
            raise ResultsFormatError(
                f"{where}: failure class {failure['class']!r} does not match status {status!r}"
            )
    elif failure is not None:
        raise ResultsFormatError(f"{where}: status 'ok' must have failure null, got {failure!r}")


def _validate_metric_block(block: Any, where: str) -> None:
    if not isinstance(block, dict):
        raise ResultsFormatError(f"{where} must be an object")
    values = block.get("values", {})
    if not isinstance(values, dict):
        raise ResultsFormatError(f"{where}.values must be an object")
    for metric, value in values.items():
        if not _is_number_or_null(value):
            raise ResultsFormatError(f"{where}.values[{metric!r}] must be a number, got {value!r}")
    for index, repetition in enumerate(block.get("repetitions", [])):
        if not isinstance(repetition, dict):
            raise ResultsFormatError(f"{where}.repetitions[{index}] must be an object")
        for metric, value in repetition.items():
            if not _is_number_or_null(value):
                raise ResultsFormatError(
                    f"{where}.repetitions[{index}][{metric!r}] must be a number, got {value!r}"
                )
    for metric, pair in (block.get("ci95") or {}).items():
        if pair is not None and not (
            isinstance(pair, list) and len(pair) == 2 and all(_is_number_or_null(v) for v in pair)
        ):
            raise ResultsFormatError(f"{where}.ci95[{metric!r}] must be [low, high], got {pair!r}")


def _is_number_or_null(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class ImportSummary:
    added: int
    updated: int
    unchanged: int
    run_ids: tuple[str, ...]

    @property
    def total(self) -> int:
        return self.added + self.updated + self.unchanged


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

    The objective comes from `objective`, else the matrix's `objective`, else the default
    (output_throughput, max, on the first workload). Fields not given keep their old value.
    """
    objective = _normalize_objective(objective or (matrix or {}).get("objective"))
    with _transaction(conn):
        _ensure_run(conn, run_id, created_at)
        if matrix is not None:
            conn.execute("UPDATE runs SET matrix_json = ? WHERE run_id = ?", (_dumps(matrix), run_id))
        if objective is not None:
            conn.execute("UPDATE runs SET objective_json = ? WHERE run_id = ?", (_dumps(objective), run_id))
        if plan_summary is not None:
            conn.execute(
                "UPDATE runs SET plan_summary_json = ? WHERE run_id = ?", (_dumps(plan_summary), run_id)
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
    with _transaction(conn):
        _ensure_run(conn, run_id, None)
        if stack_fingerprint:
            version = (stack or {}).get("sglang_version")
            _ensure_stack(conn, stack_fingerprint, version if isinstance(version, str) else None)
            if stack is not None:
                conn.execute(
                    "UPDATE stacks SET details_json = ? WHERE fingerprint = ?",
                    (_dumps(stack), stack_fingerprint),
                )
        _ensure_host(conn, run_id, host, gpu, stack_fingerprint)
        if gpu_facts is not None:
            conn.execute(
                "UPDATE hosts SET gpu_facts_json = ? WHERE run_id = ? AND host = ?",
                (_dumps(gpu_facts), run_id, host),
            )


def import_results(
    conn: sqlite3.Connection,
    records: Iterable[Mapping[str, Any]],
    *,
    run_id: str | None = None,
) -> ImportSummary:
    """Load checked results lines; `run_id` overrides the run id in the lines.

    A line already stored with identical content is skipped; a changed line for the same
    (run, host, config) replaces the old one (a node re-ran that config).
    """
    added = updated = unchanged = 0
    run_ids: dict[str, None] = {}
    with _transaction(conn):
        for record in records:
            record = dict(record)
            if run_id is not None:
                record["run_id"] = run_id
            outcome = _import_one(conn, record)
            run_ids[record["run_id"]] = None
            added += outcome == "added"
            updated += outcome == "updated"
            unchanged += outcome == "unchanged"
    return ImportSummary(added, updated, unchanged, tuple(run_ids))


def import_results_file(
    conn: sqlite3.Connection, path: str | Path, *, run_id: str | None = None
) -> ImportSummary:
    return import_results(conn, read_results_file(path), run_id=run_id)


def _import_one(conn: sqlite3.Connection, record: dict[str, Any]) -> str:
    key = (record["run_id"], record["host"], record["config_id"])
    digest = hashlib.sha256(_dumps(record).encode()).hexdigest()
    existing = conn.execute(
        "SELECT line_sha256 FROM results WHERE run_id = ? AND host = ? AND config_id = ?", key
    ).fetchone()
    if existing is not None and existing[0] == digest:
        return "unchanged"
    if existing is not None:
        conn.execute("DELETE FROM results WHERE run_id = ? AND host = ? AND config_id = ?", key)

    _ensure_run(conn, record["run_id"], record.get("started_at"))
    fingerprint = record.get("stack_fingerprint") or None
    if fingerprint:
        _ensure_stack(conn, fingerprint, record.get("sglang_version"))
    _ensure_host(conn, record["run_id"], record["host"], record.get("gpu"), fingerprint)
    conn.execute(
        "INSERT OR IGNORE INTO configs (config_id, flags_json, argv_json, point_json) VALUES (?, ?, ?, ?)",
        (record["config_id"], _dumps(record["flags"]), _dumps(record.get("argv") or []),
         _dumps(record.get("point") or {})),
    )  # fmt: skip
    conn.execute(
        """INSERT INTO results (run_id, host, config_id, status, simulated, stack_fingerprint, gpu,
               sglang_version, started_at, finished_at, timings_json, accept_length, reasons_json,
               line_sha256)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (*key, record["status"], int(bool(record.get("simulated"))), fingerprint, record.get("gpu"),
         record.get("sglang_version"), record.get("started_at"), record.get("finished_at"),
         _dumps(record.get("timings") or {}), record.get("accept_length"),
         _dumps(record.get("reasons") or []), digest),
    )  # fmt: skip
    for workload, block in record["metrics"].items():
        _insert_metrics(conn, key, workload, block)
    failure = record.get("failure")
    if failure:
        conn.execute(
            "INSERT INTO failures (run_id, host, config_id, class, message, log_tail_json) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (*key, failure["class"], str(failure.get("message") or ""),
             _dumps([str(line) for line in failure.get("log_tail") or []])),
        )  # fmt: skip
    return "updated" if existing is not None else "added"


def _insert_metrics(conn: sqlite3.Connection, key: tuple[str, str, str], workload: str, block: dict) -> None:
    values = block.get("values") or {}
    ci95 = block.get("ci95") or {}
    cv = block.get("cv") or {}
    for metric in sorted(set(values) | set(ci95) | set(cv)):
        low, high = ci95.get(metric) or (None, None)
        conn.execute(
            "INSERT INTO metric_summaries (run_id, host, config_id, workload, metric, n, value, ci_low, "
            "ci_high, cv) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*key, workload, metric, block.get("n"), values.get(metric), low, high, cv.get(metric)),
        )
    rows = [
        (*key, workload, metric, index, value)
        for index, repetition in enumerate(block.get("repetitions") or [])
        for metric, value in repetition.items()
    ]
    conn.executemany(
        "INSERT INTO measurements (run_id, host, config_id, workload, metric, repetition, value) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


def _ensure_run(conn: sqlite3.Connection, run_id: str, created_at: str | None) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO runs (run_id, created_at, objective_json) VALUES (?, ?, ?)",
        (run_id, created_at or _now(), _dumps(DEFAULT_OBJECTIVE)),
    )
    if created_at:  # a run starts when its earliest result started
        conn.execute(
            "UPDATE runs SET created_at = ? WHERE run_id = ? AND created_at > ?",
            (created_at, run_id, created_at),
        )


def _ensure_stack(conn: sqlite3.Connection, fingerprint: str, sglang_version: str | None) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO stacks (fingerprint, sglang_version) VALUES (?, ?)",
        (fingerprint, sglang_version),
    )
    if sglang_version:
        conn.execute(
            "UPDATE stacks SET sglang_version = ? WHERE fingerprint = ? AND sglang_version IS NULL",
            (sglang_version, fingerprint),
        )


def _ensure_host(
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


def _normalize_objective(objective: Any) -> dict[str, Any] | None:
    if objective is None:
        return None
    if not isinstance(objective, Mapping):
        raise ValueError(f"objective must be a mapping with workload, metric, goal; got {objective!r}")
    goal = objective.get("goal", "max")
    if goal not in ("max", "min"):
        raise ValueError(f"objective goal {goal!r} must be 'max' or 'min'")
    metric = objective.get("metric") or DEFAULT_OBJECTIVE["metric"]
    return {"workload": objective.get("workload"), "metric": metric, "goal": goal}


# --------------------------------------------------------------------------- reading


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
        matrix=_loads(row["matrix_json"]),
        plan_summary=_loads(row["plan_summary_json"]),
    )


def resolved_objective(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """The run's objective with its workload filled in (first workload measured if unset)."""
    objective = dict(get_run(conn, run_id).objective)
    if not objective.get("workload"):
        row = conn.execute(
            "SELECT workload FROM metric_summaries WHERE run_id = ? ORDER BY workload LIMIT 1", (run_id,)
        ).fetchone()
        objective["workload"] = row[0] if row else None
    return objective


def list_runs(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """One summary row per run, newest first."""
    rows = conn.execute(
        """SELECT r.run_id, r.created_at,
                  (SELECT COUNT(DISTINCT host) FROM hosts h WHERE h.run_id = r.run_id) AS hosts,
                  COUNT(res.config_id) AS results,
                  SUM(res.status = 'ok') AS ok,
                  MAX(res.simulated) AS simulated
           FROM runs r LEFT JOIN results res ON res.run_id = r.run_id
           GROUP BY r.run_id ORDER BY r.created_at DESC, r.run_id"""
    ).fetchall()
    runs = []
    for row in rows:
        output = build_run_output(conn, row["run_id"])
        best = output["best"]
        runs.append(
            {
                "run_id": row["run_id"],
                "created_at": row["created_at"],
                "hosts": row["hosts"],
                "results": row["results"],
                "ok": row["ok"] or 0,
                "failed": row["results"] - (row["ok"] or 0),
                "simulated": bool(row["simulated"]),
                "objective": output["summary"]["objective"],
                "best": None if best is None else {"id": best["id"], "host": best["host"],
                                                   "objective": best["objective"]},
            }
        )  # fmt: skip
    return runs


def run_results(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """The run's results lines as the node wrote them (contract shape), ordered by host, config."""
    get_run(conn, run_id)
    rows = conn.execute(
        """SELECT res.*, c.flags_json, c.argv_json, c.point_json,
                  f.class AS failure_class, f.message AS failure_message, f.log_tail_json
           FROM results res JOIN configs c USING (config_id)
           LEFT JOIN failures f USING (run_id, host, config_id)
           WHERE res.run_id = ? ORDER BY res.host, res.config_id""",
        (run_id,),
    ).fetchall()
    metrics = _metrics_by_result(conn, run_id)
    records = []
    for row in rows:
        key = (row["host"], row["config_id"])
        failure = None
        if row["failure_class"] is not None:
            failure = {
                "class": row["failure_class"],
                "message": row["failure_message"],
                "log_tail": json.loads(row["log_tail_json"]),
            }
        records.append(
            {
                "schema": RESULTS_SCHEMA,
                "run_id": run_id,
                "host": row["host"],
                "config_id": row["config_id"],
                "point": json.loads(row["point_json"]),
                "flags": json.loads(row["flags_json"]),
                "argv": json.loads(row["argv_json"]),
                "status": row["status"],
                "simulated": bool(row["simulated"]),
                "stack_fingerprint": row["stack_fingerprint"],
                "gpu": row["gpu"],
                "sglang_version": row["sglang_version"],
                "started_at": row["started_at"],
                "finished_at": row["finished_at"],
                "timings": json.loads(row["timings_json"]),
                "metrics": metrics.get(key, {}),
                "accept_length": row["accept_length"],
                "failure": failure,
                "reasons": json.loads(row["reasons_json"]),
            }
        )
    return records


def _metrics_by_result(conn: sqlite3.Connection, run_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for row in conn.execute(
        "SELECT * FROM metric_summaries WHERE run_id = ? ORDER BY host, config_id, workload, metric",
        (run_id,),
    ):
        block = out.setdefault((row["host"], row["config_id"]), {}).setdefault(
            row["workload"], {"n": row["n"], "values": {}, "ci95": {}, "cv": {}, "repetitions": []}
        )
        if row["value"] is not None or row["metric"] in block["values"]:
            block["values"][row["metric"]] = row["value"]
        if row["ci_low"] is not None or row["ci_high"] is not None:
            block["ci95"][row["metric"]] = [row["ci_low"], row["ci_high"]]
        if row["cv"] is not None:
            block["cv"][row["metric"]] = row["cv"]
    for row in conn.execute(
        "SELECT * FROM measurements WHERE run_id = ? ORDER BY host, config_id, workload, repetition, metric",
        (run_id,),
    ):
        block = out.setdefault((row["host"], row["config_id"]), {}).setdefault(
            row["workload"], {"n": None, "values": {}, "ci95": {}, "cv": {}, "repetitions": []}
        )
        repetitions = block["repetitions"]
        while len(repetitions) <= row["repetition"]:
            repetitions.append({})
        repetitions[row["repetition"]][row["metric"]] = row["value"]
    return out


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
            "gpu_facts": _loads(row["gpu_facts_json"]),
            "stack_fingerprint": row["stack_fingerprint"],
            "sglang_version": row["sglang_version"],
            "stack": _loads(row["details_json"]),
        }
        for row in rows
    ]


def objective_value(record: Mapping[str, Any], objective: Mapping[str, Any]) -> float | None:
    """The objective metric of one result (None when that workload or metric is missing)."""
    block = (record.get("metrics") or {}).get(objective.get("workload"))
    if not block:
        return None
    value = (block.get("values") or {}).get(objective["metric"])
    return float(value) if _is_number_or_null(value) and value is not None else None


def objective_ci95(record: Mapping[str, Any], objective: Mapping[str, Any]) -> list[float] | None:
    block = (record.get("metrics") or {}).get(objective.get("workload")) or {}
    pair = (block.get("ci95") or {}).get(objective["metric"])
    if pair and all(v is not None for v in pair):
        return [float(pair[0]), float(pair[1])]
    return None


def pick_best(results: Iterable[Mapping[str, Any]], objective: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The best result by the objective among status ok only (wrong-output never wins)."""
    candidates = [
        (value, result)
        for result in results
        if result.get("status") == "ok" and (value := objective_value(result, objective)) is not None
    ]
    if not candidates:
        return None
    sign = 1.0 if objective.get("goal", "max") == "max" else -1.0
    # max() keeps the first of equal values: order by host and id so ties break stably.
    candidates.sort(key=lambda c: (str(c[1].get("host")), str(c[1].get("config_id") or c[1].get("id"))))
    return max(candidates, key=lambda c: sign * c[0])[1]


def build_run_output(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """The `--json` shape: {"run_id", "results": [...], "best": one of results | None, "summary"}.

    Each result has the stable keys id, host, status, flags, failure, metrics, plus argv,
    point, simulated, objective, objective_ci95, reasons, timings, gpu, sglang_version and
    stack_fingerprint.
    """
    run = get_run(conn, run_id)
    objective = resolved_objective(conn, run_id)
    results = []
    for record in run_results(conn, run_id):
        results.append(
            {
                "id": record["config_id"],
                "host": record["host"],
                "status": record["status"],
                "flags": record["flags"],
                "failure": record["failure"],
                "metrics": record["metrics"],
                "argv": record["argv"],
                "point": record["point"],
                "simulated": record["simulated"],
                "objective": objective_value(record, objective),
                "objective_ci95": objective_ci95(record, objective),
                "reasons": record["reasons"],
                "timings": record["timings"],
                "gpu": record["gpu"],
                "sglang_version": record["sglang_version"],
                "stack_fingerprint": record["stack_fingerprint"],
            }
        )
    best = pick_best(results, objective)
    failed: dict[str, int] = {}
    for result in results:
        if result["status"] != "ok":
            failed[result["status"]] = failed.get(result["status"], 0) + 1
    workloads = sorted({w for result in results for w in result["metrics"]})
    summary = {
        "objective": objective,
        "results": len(results),
        "configs": len({r["id"] for r in results}),
        "ok": sum(r["status"] == "ok" for r in results),
        "failed": dict(sorted(failed.items())),
        "hosts": sorted({r["host"] for r in results}),
        "workloads": workloads,
        "simulated": any(r["simulated"] for r in results),
        "plan": run.plan_summary,
        "created_at": run.created_at,
    }
    return {"run_id": run_id, "results": results, "best": best, "summary": summary}


# --------------------------------------------------------------------------- helpers


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
