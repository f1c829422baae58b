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
import os
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract as contract

# The contract's, re-exported for the controller's callers (defined once, in results_contract).
RESULTS_SCHEMA = contract.SCHEMA_VERSION
FAILURE_CLASSES = contract.FAILURE_CLASSES
STATUSES = contract.STATUSES
ResultsFormatError = contract.ResultsFormatError
validate_result = contract.validate_line
# bwtune refuses to start a sweep with less than this free where it keeps the database and reports.
MIN_FREE_BYTES = 16 * 1024 * 1024


class UnknownRunError(LookupError):
    """No run with that id in the database."""


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer bwtune."""


class MissingDatabaseError(LookupError):
    """A reading command named a results database that does not exist (it never creates one)."""


class StorageError(RuntimeError):
    """BWTUNE_HOME or the results database cannot take a run's results; one line says why."""


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
    """`$BWTUNE_HOME/runs/<run id>`; ValueError for a run id that is not one path component."""
    return bwtune_home() / "runs" / contract.check_run_id(run_id)


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """The `--db PATH` option every command that reads or writes results shares."""
    parser.add_argument(
        "--db", metavar="PATH", type=Path, default=None,
        help="results database (default: $BWTUNE_DB, else $BWTUNE_HOME/results.db, "
        "else ~/.local/share/bwtune/results.db)",
    )  # fmt: skip


# Errors a command reports as one line with exit code 2 (bad input).
DB_INPUT_ERRORS = (sqlite3.DatabaseError, OSError, MissingDatabaseError)


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
    # 2: every field the node writes (launch_command, release, screened_out, duplicate_of and
    # the whole line, so a field added later is kept too), and measurements never replaced
    # silently: a changed line for the same (run, host, config) moves the old one here.
    (
        "ALTER TABLE results ADD COLUMN launch_command_json TEXT",
        "ALTER TABLE results ADD COLUMN release_json TEXT",
        "ALTER TABLE results ADD COLUMN screened_out INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE results ADD COLUMN duplicate_of TEXT",
        "ALTER TABLE results ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE results ADD COLUMN line_json TEXT",
        """CREATE TABLE superseded_results (
            run_id TEXT NOT NULL,
            host TEXT NOT NULL,
            config_id TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            status TEXT NOT NULL,
            finished_at TEXT,
            superseded_at TEXT NOT NULL,
            line_json TEXT NOT NULL,
            PRIMARY KEY (run_id, host, config_id, attempt)
        )""",
    ),
    # 3: run tags (`bwtune regress` tags its runs `regression`) and named baselines, each
    # with who set it, when and why.
    (
        """CREATE TABLE run_tags (
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (run_id, tag)
        )""",
        "CREATE INDEX run_tags_by_tag ON run_tags(tag, run_id)",
        """CREATE TABLE baselines (
            name TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(run_id),
            set_by TEXT NOT NULL,
            set_at TEXT NOT NULL,
            reason TEXT NOT NULL
        )""",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: str | Path | None = None, *, create: bool = True) -> sqlite3.Connection:
    """Open the results database in WAL mode and migrate it.

    `create=False` is for reading commands (runs, report, export): a database that does not
    exist raises MissingDatabaseError, and neither it nor its folder is created.
    """
    db_path = Path(path) if path is not None else default_db_path()
    if str(db_path) == ":memory:":
        conn = sqlite3.connect(":memory:", isolation_level=None)
    elif create:
        db_path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: transactions are explicit (`_transaction`), DDL included.
        conn = sqlite3.connect(str(db_path), isolation_level=None, timeout=10.0)
    else:
        if not db_path.is_file():
            raise MissingDatabaseError(
                f"no results database at {db_path} (bwtune sweep or bwtune import creates it)"
            )
        # mode=rw: SQLite itself refuses to create the file if it vanished meanwhile.
        uri = db_path.resolve().as_uri() + "?mode=rw"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=10.0)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
        migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def check_writable(
    home: Path | None = None, db_path: Path | None = None, *, min_free_bytes: int = MIN_FREE_BYTES
) -> None:
    """Refuse up front (StorageError, one line) a BWTUNE_HOME or results database that could
    not take a run's results: not creatable, read-only, (nearly) full, damaged or too new.

    A sweep calls this before it launches anything, so such a fault never costs a sweep.
    """
    home = home if home is not None else bwtune_home()
    db_path = db_path if db_path is not None else default_db_path()
    _check_folder(home, "BWTUNE_HOME", min_free_bytes)
    if db_path.parent != home:
        _check_folder(db_path.parent, "results database folder", min_free_bytes)
    if not db_path.exists():
        return
    try:
        conn = connect(db_path, create=False)
        try:
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise StorageError(
                    f"results database {db_path} is damaged ({check}); move it away or give --db NEWPATH"
                )
            with _transaction(conn):  # a write that is rolled back: a read-only file fails here
                conn.execute("CREATE TABLE bwtune_write_probe (x INTEGER)")
                raise _RollBack
        except _RollBack:
            pass
        finally:
            conn.close()
    except (sqlite3.DatabaseError, OSError, SchemaTooNewError, MissingDatabaseError) as err:
        raise StorageError(f"results database {db_path}: {err}") from None


class _RollBack(Exception):
    """Leaves a probe transaction through its rollback."""


def _check_folder(folder: Path, what: str, min_free_bytes: int) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".bwtune-write-probe.") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
        stats = os.statvfs(folder)
    except OSError as err:
        raise StorageError(f"{what} {folder} is not writable: {err.strerror or err}") from None
    free = stats.f_bavail * stats.f_frsize
    if free < min_free_bytes:
        raise StorageError(
            f"{what} {folder} has {free // 2**20} MiB free; a run needs at least "
            f"{min_free_bytes // 2**20} MiB for its results and reports"
        )


def storage_failure_message(
    err: BaseException, run_id: str, node_results: Mapping[str, str], db_path: Path | None = None
) -> str:
    """One line for results that could not be stored at the end of a sweep: where they are
    safe on the nodes and how to import them later."""
    where = ", ".join(f"{host}:{path}" for host, path in sorted(node_results.items())) or "the nodes"
    db = db_path if db_path is not None else default_db_path()
    return (
        f"could not store run {run_id} in the results database {db}: {err}; the results are kept on "
        f"{where}: copy each file here and run `bwtune import FILE --run-id {run_id}`"
    )


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


@dataclass(frozen=True)
class ResultsFileContent:
    records: list[dict[str, Any]]
    warnings: list[str]  # e.g. a torn last line that was skipped


def read_results_file(path: str | Path, *, run_id: str | None = None) -> ResultsFileContent:
    """Parse and check a node's results file under the contract's one torn-last-line rule
    (the node's own reader uses the same): a torn last line is skipped with a warning, a
    damaged line elsewhere raises ResultsFormatError naming it. `run_id` replaces the
    lines' run ids before they are checked."""
    if run_id is not None:
        contract.check_run_id(run_id, "--run-id")
    source = Path(path)
    if not source.is_file() and source.exists():
        raise ResultsFormatError(f"{source}: not a regular file")
    try:
        records, warnings = contract.read_jsonl(str(source), validate=True, run_id=run_id)
    except OSError as exc:
        raise ResultsFormatError(f"{source}: cannot read results file: {exc.strerror or exc}") from None
    return ResultsFileContent(records, warnings)


# --------------------------------------------------------------------------- writing


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
    with _transaction(conn):
        _ensure_run(conn, run_id, created_at)
        if matrix is not None:
            # Not key-sorted: the matrix's own order of axes and workloads is the report's order.
            conn.execute("UPDATE runs SET matrix_json = ? WHERE run_id = ?", (json.dumps(matrix), run_id))
        if resolved is not None:
            conn.execute("UPDATE runs SET objective_json = ? WHERE run_id = ?", (_dumps(resolved), run_id))
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
    with _transaction(conn):
        for number, record in enumerate(records, start=1):
            record = dict(record)
            if run_id is not None:
                record["run_id"] = run_id
            validate_result(record, f"result {number}")
            outcome = _import_one(conn, record)
            run_ids[record["run_id"]] = None
            if isinstance(outcome, Replacement):
                replaced.append(outcome)
            else:
                added += outcome == "added"
                unchanged += outcome == "unchanged"
    return ImportSummary(added, len(replaced), unchanged, tuple(run_ids), tuple(replaced))


def _import_one(conn: sqlite3.Connection, record: dict[str, Any]) -> str | Replacement:
    key = (record["run_id"], record["host"], record["config_id"])
    digest = hashlib.sha256(_dumps(record).encode()).hexdigest()
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
    attempt = 1
    if existing is not None:
        conn.execute(
            "INSERT OR REPLACE INTO superseded_results (run_id, host, config_id, attempt, status, "
            "finished_at, superseded_at, line_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*key, existing["attempt"], existing["status"], existing["finished_at"], _now(),
             _dumps(_stored_line(conn, key))),
        )  # fmt: skip
        conn.execute("DELETE FROM results WHERE run_id = ? AND host = ? AND config_id = ?", key)
        attempt = existing["attempt"] + 1

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
    release = record.get("release")
    conn.execute(
        """INSERT INTO results (run_id, host, config_id, status, simulated, stack_fingerprint, gpu,
               sglang_version, started_at, finished_at, timings_json, accept_length, reasons_json,
               line_sha256, launch_command_json, release_json, screened_out, duplicate_of, attempt,
               line_json)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (*key, record["status"], int(bool(record.get("simulated"))), fingerprint, record.get("gpu"),
         record.get("sglang_version"), record.get("started_at"), record.get("finished_at"),
         _dumps(record.get("timings") or {}), record.get("accept_length"),
         _dumps(record.get("reasons") or []), digest, _dumps(record.get("launch_command") or []),
         None if release is None else _dumps(release), int(bool(record.get("screened_out"))),
         record.get("duplicate_of"), attempt, _dumps(record)),
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
    if existing is None:
        return "added"
    return Replacement(*key, old_status=existing["status"], new_status=record["status"], attempt=attempt)


def import_results_file(
    conn: sqlite3.Connection, path: str | Path, *, run_id: str | None = None
) -> ImportSummary:
    return import_results(conn, read_results_file(path, run_id=run_id).records, run_id=run_id)


def _stored_line(conn: sqlite3.Connection, key: tuple[str, str, str]) -> dict[str, Any]:
    """The stored line of one (run, host, config), as the node wrote it."""
    row = conn.execute(
        "SELECT line_json FROM results WHERE run_id = ? AND host = ? AND config_id = ?", key
    ).fetchone()
    if row is not None and row["line_json"] is not None:
        return dict(json.loads(row["line_json"]))
    # Imported before schema 2 kept whole lines: rebuild it from the columns.
    return next(line for line in run_results(conn, key[0]) if (line["host"], line["config_id"]) == key[1:])


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
        (run_id, created_at or _now(), _dumps(contract.normalize_objective(None))),
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
    """One summary row per run, newest first. `failed` counts launched configs that failed;
    pruned and duplicate configs are `not_launched`, never failures."""
    rows = conn.execute(
        """SELECT r.run_id, r.created_at,
                  (SELECT COUNT(DISTINCT host) FROM hosts h WHERE h.run_id = r.run_id) AS hosts
           FROM runs r ORDER BY r.created_at DESC, r.run_id"""
    ).fetchall()
    runs = []
    for row in rows:
        output = build_run_output(conn, row["run_id"])
        summary, best = output["summary"], output["best"]
        runs.append(
            {
                "run_id": row["run_id"],
                "created_at": row["created_at"],
                "hosts": row["hosts"],
                "results": summary["results"],
                "ok": summary["ok"],
                "failed": sum(summary["failed"].values()),
                "not_launched": sum(summary["not_launched"].values()),
                "simulated": summary["simulated"],
                "objective": summary["objective"],
                "best": None if best is None else {"id": best["id"], "host": best["host"],
                                                   "objective": best["objective"]},
            }
        )  # fmt: skip
    return runs


def run_results(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """The run's results lines as the node wrote them (contract shape, every field the node
    wrote, fields unknown to this bwtune included), ordered by host, config."""
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
        columns = {
            "schema": RESULTS_SCHEMA,
            "run_id": run_id,
            "host": row["host"],
            "config_id": row["config_id"],
            "point": json.loads(row["point_json"]),
            "flags": json.loads(row["flags_json"]),
            "argv": json.loads(row["argv_json"]),
            "launch_command": _loads(row["launch_command_json"]) or [],
            "status": row["status"],
            "simulated": bool(row["simulated"]),
            "stack_fingerprint": row["stack_fingerprint"],
            "gpu": row["gpu"],
            "sglang_version": row["sglang_version"],
            "started_at": row["started_at"],
            "finished_at": row["finished_at"],
            "timings": json.loads(row["timings_json"]),
            "release": _loads(row["release_json"]),
            "metrics": metrics.get(key, {}),
            "accept_length": row["accept_length"],
            "screened_out": bool(row["screened_out"]),
            "duplicate_of": row["duplicate_of"],
            "failure": failure,
            "reasons": json.loads(row["reasons_json"]),
        }
        # The whole line as imported (schema 2+) keeps what no column holds.
        stored = _loads(row["line_json"]) or {}
        records.append({**stored, **columns})
    return records


def superseded_results(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """Earlier measurements of re-measured configs, oldest first, each with its `attempt`."""
    get_run(conn, run_id)
    return [
        {**json.loads(row["line_json"]), "attempt": row["attempt"], "superseded_at": row["superseded_at"]}
        for row in conn.execute(
            "SELECT * FROM superseded_results WHERE run_id = ? ORDER BY host, config_id, attempt", (run_id,)
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
            stored = _loads(row["line_json"])
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


def build_run_output(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """The `--json` shape: {"schema", "run_id", "results": [...], "best": one of results | None,
    "summary"}.

    Each result has the stable keys id, host, status, flags, failure, metrics, plus argv,
    launch_command, point, simulated, objective, objective_ci95, objective_launches, reasons,
    timings, release, cold_start (null for lines without it), screened_out, duplicate_of,
    attempt, started_at, finished_at, gpu, sglang_version and stack_fingerprint. `objective`
    is the value the result is ranked by: for a config with two or more ok launches on one
    host and stack (a re-measure) the mean over them, as `pick_best` pools them, and then
    `objective_launches` lists each launch oldest first (attempt, finished_at, value, ci95,
    repetitions); null otherwise. The summary counts `failed`
    (launched configs that failed, by class) apart from `not_launched` (pruned, duplicate)
    and `screened_out` (ok).
    """
    run = get_run(conn, run_id)
    objective = resolved_objective(conn, run_id)
    records = run_results(conn, run_id)
    attempts = {
        (row["host"], row["config_id"]): row["attempt"]
        for row in conn.execute("SELECT host, config_id, attempt FROM results WHERE run_id = ?", (run_id,))
    }
    earlier = superseded_results(conn, run_id)
    # A config launched more than once on one stack (adaptive's finals) shows what pick_best
    # ranks it by: the mean over its launches, the current line and the superseded ones.
    pooled = contract.pooled_launches([*records, *earlier], objective)
    results = []
    for record in records:
        attempt = attempts[(record["host"], record["config_id"])]
        value, ci, launches = _competing_value(record, attempt, objective, pooled)
        results.append(
            {
                "id": record["config_id"],
                "host": record["host"],
                "status": record["status"],
                "flags": record["flags"],
                "failure": record["failure"],
                "metrics": record["metrics"],
                "argv": record["argv"],
                "launch_command": record["launch_command"],
                "point": record["point"],
                "simulated": record["simulated"],
                "objective": value,
                "objective_ci95": None if ci is None else list(ci),
                "objective_launches": launches,
                "reasons": record["reasons"],
                "timings": record["timings"],
                "release": record["release"],
                "cold_start": record.get("cold_start"),
                "screened_out": record["screened_out"],
                "duplicate_of": record["duplicate_of"],
                "attempt": attempt,
                "started_at": record["started_at"],
                "finished_at": record["finished_at"],
                "gpu": record["gpu"],
                "sglang_version": record["sglang_version"],
                "stack_fingerprint": record["stack_fingerprint"],
            }
        )
    # Every launch of a config competes (pick_best pools a re-measured config's lines).
    best_line = contract.pick_best([*records, *earlier], objective)
    best = (
        None
        if best_line is None
        else next(r for r in results if (r["host"], r["id"]) == (best_line["host"], best_line["config_id"]))
    )
    counts = contract.outcome_counts(records)
    superseded = conn.execute(
        "SELECT COUNT(*) FROM superseded_results WHERE run_id = ?", (run_id,)
    ).fetchone()[0]
    summary = {
        "objective": objective,
        "results": len(results),
        "configs": len({r["id"] for r in results}),
        "launched": sum(contract.is_launched(r["status"]) for r in results),
        "ok": counts["ok"],
        "failed": counts["failed"],
        "not_launched": counts["not_launched"],
        "screened_out": counts["screened_out"],
        "superseded": superseded,
        "hosts": sorted({r["host"] for r in results}),
        "workloads": sorted({w for result in results for w in result["metrics"]}),
        "simulated": any(r["simulated"] for r in results),
        "plan": run.plan_summary,
        "created_at": run.created_at,
    }
    return contract.versioned({"run_id": run_id, "results": results, "best": best, "summary": summary})


def _competing_value(
    record: dict[str, Any],
    attempt: int,
    objective: Mapping[str, Any],
    pooled: Mapping[tuple[str, str, str], tuple[float, list[tuple[float, Mapping[str, Any]]]]],
) -> tuple[float | None, tuple[float, float] | None, list[dict[str, Any]] | None]:
    """A result's objective value, its 95% CI and, for a config with more than one ok launch
    on its stack, each launch oldest first (by attempt): the value is then the mean
    pick_best ranks it by, the CI is over the repetitions of every launch (over the
    launches' values when one lacks repetitions)."""
    group = pooled.get(contract.launch_key(record))
    if contract.eligible_value(record, objective) is None or group is None or len(group[1]) < 2:
        return contract.metric_value(record, objective), contract.metric_ci95(record, objective), None
    mean, measured = group
    # Superseded lines carry their attempt; the current one is the latest.
    ordered = sorted(measured, key=lambda m: int(m[1].get("attempt", attempt)))
    samples = [contract.metric_repetitions(line, objective) for _value, line in ordered]
    values = [value for value, _line in ordered]
    ci = contract.mean_ci95([v for rep in samples for v in rep] if all(samples) else values)[1]
    launches = [
        {
            "attempt": line.get("attempt", attempt),
            "finished_at": line.get("finished_at"),
            "value": value,
            "ci95": None if (line_ci := contract.metric_ci95(line, objective)) is None else list(line_ci),
            "repetitions": len(reps),
        }
        for (value, line), reps in zip(ordered, samples, strict=True)
    ]
    return mean, ci, launches


def nothing_measured(output: Mapping[str, Any]) -> str | None:
    """The one line for a run that measured nothing (every launch failed, or none was
    launched), None when at least one config was measured. `bwtune sweep` exits with
    exit_codes.NOTHING_MEASURED after printing it."""
    summary = output["summary"]
    if summary["ok"]:
        return None
    failed = summary["failed"]
    if failed:
        classes = ", ".join(f"{name} {count}" for name, count in failed.items())
        return (
            f"run {output['run_id']} measured nothing: every launch failed ({classes}); "
            f"see the failures in the report or `bwtune export {output['run_id']} --format json`"
        )
    return f"run {output['run_id']} measured nothing: no config was launched (all pruned or duplicate)"


# --------------------------------------------------------------------------- tags and baselines


def tag_run(conn: sqlite3.Connection, run_id: str, tag: str) -> None:
    get_run(conn, run_id)
    with _transaction(conn):
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
    with _transaction(conn):
        conn.execute(
            "INSERT OR REPLACE INTO baselines (name, run_id, set_by, set_at, reason) VALUES (?, ?, ?, ?, ?)",
            (name, run_id, set_by, _now(), reason),
        )


def get_baseline(conn: sqlite3.Connection, name: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM baselines WHERE name = ?", (name,)).fetchone()
    return None if row is None else dict(row)


def list_baselines(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [dict(row) for row in conn.execute("SELECT * FROM baselines ORDER BY set_at DESC, name")]


# --------------------------------------------------------------------------- helpers


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
