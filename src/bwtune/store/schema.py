"""The results database's schema: its ordered migrations, and the columns the field table
(results_fields.FIELDS) says a migrated database has.

The schema is versioned with `PRAGMA user_version` (on PostgreSQL, the one row of
`bwtune_schema`) and upgraded by the ordered `MIGRATIONS`, the same on both backends
(bwtune.store.dialect rewrites what PostgreSQL spells otherwise). A released migration is
history: never edited, only appended to. A results
line field stored in a column of its own (results_fields: store "results" or "configs")
is added to the table by a new migration; `column_problems` (and its test) compare the
migrated schema with the field table, so neither can drift from the other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_fields
from bwtune.store.dialect import POSTGRES_FUNCTIONS, dialect_of
from bwtune.store.errors import SchemaTooNewError


class SQLiteOnly(str):
    """A migration's statement that moves rows only a SQLite store can have: those written by
    a bwtune before that migration. A PostgreSQL store is created by a bwtune of schema 4 or
    later, so its tables are empty at that step and it skips the statement."""

    __slots__ = ()


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
    # 4: at scale (issue 21 #15). One row per result and workload instead of one per metric
    # and per repetition (18 million rows for a 100,000-line file): the values a query ranks
    # by, as JSON; the rest of the block (n, ci95, cv, repetitions) is in the result's whole
    # line, or, for results imported before schema 2 kept whole lines, in `block_json`. A
    # covering index answers counts and the best config without reading the wide rows.
    (
        """CREATE TABLE workload_values (
            run_id TEXT NOT NULL,
            host TEXT NOT NULL,
            config_id TEXT NOT NULL,
            workload TEXT NOT NULL,
            values_json TEXT NOT NULL,
            block_json TEXT,
            PRIMARY KEY (run_id, host, config_id, workload),
            FOREIGN KEY (run_id, host, config_id)
                REFERENCES results(run_id, host, config_id) ON DELETE CASCADE
        )""",
        SQLiteOnly("""INSERT INTO workload_values (run_id, host, config_id, workload, values_json)
           SELECT run_id, host, config_id, workload,
                  json_group_object(metric, value) FILTER (WHERE value IS NOT NULL)
           FROM metric_summaries GROUP BY run_id, host, config_id, workload"""),
        SQLiteOnly("""INSERT OR IGNORE INTO workload_values (run_id, host, config_id, workload, values_json)
           SELECT DISTINCT run_id, host, config_id, workload, '{}' FROM measurements"""),
        SQLiteOnly("""UPDATE workload_values SET block_json = (
               SELECT json_object(
                   'n', (SELECT MAX(m.n) FROM metric_summaries m WHERE m.run_id = w.run_id
                         AND m.host = w.host AND m.config_id = w.config_id AND m.workload = w.workload),
                   'values', json(w.values_json),
                   'ci95', json((SELECT json_group_object(m.metric, json_array(m.ci_low, m.ci_high))
                                 FILTER (WHERE m.ci_low IS NOT NULL OR m.ci_high IS NOT NULL)
                                 FROM metric_summaries m WHERE m.run_id = w.run_id AND m.host = w.host
                                 AND m.config_id = w.config_id AND m.workload = w.workload)),
                   'cv', json((SELECT json_group_object(m.metric, m.cv) FILTER (WHERE m.cv IS NOT NULL)
                               FROM metric_summaries m WHERE m.run_id = w.run_id AND m.host = w.host
                               AND m.config_id = w.config_id AND m.workload = w.workload)),
                   'repetitions', json(COALESCE((
                       SELECT json_group_array(json(one)) FROM (
                           SELECT json_group_object(x.metric, x.value) AS one FROM measurements x
                           WHERE x.run_id = w.run_id AND x.host = w.host AND x.config_id = w.config_id
                             AND x.workload = w.workload
                           GROUP BY x.repetition ORDER BY x.repetition)), '[]')))
               FROM workload_values w WHERE w.rowid = workload_values.rowid)
           WHERE EXISTS (SELECT 1 FROM results r WHERE r.run_id = workload_values.run_id
                         AND r.host = workload_values.host AND r.config_id = workload_values.config_id
                         AND r.line_json IS NULL)"""),
        "DROP TABLE measurements",
        "DROP TABLE metric_summaries",
        """CREATE INDEX results_outcomes ON results(run_id, status, host, config_id, stack_fingerprint,
               finished_at, attempt, simulated, screened_out)""",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

# Columns of a table that hold no field of the line: the keys of a result (results, configs
# rows also carry run_id, host and config_id, declared with their fields) and, in results,
# the line's canonical hash (re-imports are no-ops), its attempt and the whole line.
BOOKKEEPING_COLUMNS: dict[str, dict[str, str]] = {
    "results": {"line_sha256": "TEXT NOT NULL", "attempt": "INTEGER NOT NULL DEFAULT 1", "line_json": "TEXT"},
    "configs": {"config_id": "TEXT PRIMARY KEY"},
}


def declared_columns(table: str) -> dict[str, str]:
    """`table`'s columns ("results" or "configs") as the field table and the bookkeeping
    declare them: name -> declaration."""
    declared = {f.column: str(f.sql) for f in results_fields.columns(table) if f.column}
    return {**declared, **BOOKKEEPING_COLUMNS[table]}


def _declaration(sql: str, *, postgres: bool = False) -> tuple[str, bool, str | None]:
    """(type, NOT NULL, default) of a column declaration, as PRAGMA table_info gives them
    (a PRIMARY KEY column is NOT NULL on PostgreSQL, not in SQLite's table_info)."""
    words = sql.split()
    default = words[words.index("DEFAULT") + 1] if "DEFAULT" in words else None
    return words[0], "NOT NULL" in sql or (postgres and "PRIMARY KEY" in sql), default


# PostgreSQL's names of the declared column types (information_schema.columns.data_type).
_POSTGRES_TYPES = {"text": "TEXT", "integer": "INTEGER", "double precision": "REAL"}


def table_columns(conn: Any, table: str) -> dict[str, tuple[str, bool, str | None]]:
    """A table's columns as the database has them: name -> (type, NOT NULL, default), in
    SQLite's words (PRAGMA table_info) on either backend."""
    if dialect_of(conn).name == "postgresql":
        return {
            row[0]: (_POSTGRES_TYPES.get(row[1], row[1].upper()), row[2] == "NO",
                     None if row[3] is None else str(row[3]).split("::")[0])
            for row in conn.execute(
                "SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
                (table,),
            )
        }  # fmt: skip
    return {row[1]: (row[2], bool(row[3]), row[4]) for row in conn.execute(f"PRAGMA table_info({table})")}


def column_problems(conn: Any) -> list[str]:
    """Where a database's results and configs tables differ from the declared columns (name,
    type, NOT NULL, default): empty for a database this bwtune created or migrated."""
    problems = []
    for table in BOOKKEEPING_COLUMNS:
        actual = table_columns(conn, table)
        postgres = dialect_of(conn).name == "postgresql"
        wanted = {name: _declaration(sql, postgres=postgres) for name, sql in declared_columns(table).items()}
        for name in sorted(set(actual) | set(wanted)):
            if actual.get(name) != wanted.get(name):
                problems.append(
                    f"{table}.{name}: the database has {actual.get(name)}, declared {wanted.get(name)}"
                )
    return problems


def schema_version(conn: Any) -> int:
    """The database's schema version: 0 for one bwtune never wrote to."""
    if dialect_of(conn).name == "postgresql":
        if conn.execute("SELECT to_regclass('bwtune_schema')").fetchone()[0] is None:
            return 0
        row = conn.execute("SELECT MAX(version) FROM bwtune_schema").fetchone()
        return int(row[0] or 0)
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _set_version(conn: Any, version: int) -> None:
    if dialect_of(conn).name == "postgresql":
        conn.execute("DELETE FROM bwtune_schema")
        conn.execute("INSERT INTO bwtune_schema (version) VALUES (?)", (version,))
    else:
        conn.execute(f"PRAGMA user_version = {version}")


def migrate(conn: Any) -> int:
    """Apply the migrations this database lacks, each atomically; return the new version.

    On PostgreSQL the migrations run under the store's writer lock (transaction): two
    controllers opening a new store at once migrate it once."""
    postgres = dialect_of(conn).name == "postgresql"
    with transaction(conn):
        if postgres:
            conn.execute("CREATE TABLE IF NOT EXISTS bwtune_schema (version INTEGER NOT NULL)")
        current = schema_version(conn)
        if current > SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"results database schema version {current} is newer than this bwtune "
                f"understands ({SCHEMA_VERSION}); upgrade bwtune"
            )
        if postgres and conn.execute("SELECT to_regprocedure('bwtune_json(text)')").fetchone()[0] is None:
            for statement in POSTGRES_FUNCTIONS:
                conn.execute(statement)
        for version in range(current, SCHEMA_VERSION):
            for statement in MIGRATIONS[version]:
                if not (postgres and isinstance(statement, SQLiteOnly)):
                    conn.execute(statement)
            _set_version(conn, version + 1)
    return schema_version(conn)


@contextmanager
def transaction(conn: Any) -> Iterator[None]:
    """One atomic write: SQLite's BEGIN IMMEDIATE (the one writer), on PostgreSQL a
    transaction holding the store's writer lock (one writer across every controller, so
    two controllers' transactions never interleave nor deadlock)."""
    begin_write = getattr(conn, "begin_write", None)
    if begin_write is not None:
        begin_write()
    else:
        conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
