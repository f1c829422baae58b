"""Opening the results database: for writing (created and migrated on open), for reading
only (never a write, never a migration), and the up-front check that a sweep's results
will have somewhere to go. A file is a SQLite database; a `postgresql://` URL (paths.
DatabaseURL) a store on a PostgreSQL server (bwtune.store.postgres), with the same schema,
migrations and queries."""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import TypeAlias

from bwtune.store import schema
from bwtune.store.errors import MissingDatabaseError, SchemaTooNewError, StorageError
from bwtune.store.paths import DatabaseURL, bwtune_home, database_target
from bwtune.store.postgres import PostgresConnection, connect_postgres

# What connect and connect_readonly give: a sqlite3 connection, or a PostgreSQL one that
# takes the same calls.
StoreConnection: TypeAlias = sqlite3.Connection | PostgresConnection

# bwtune refuses to start a sweep with less than this free where it keeps the database and reports.
MIN_FREE_BYTES = 16 * 1024 * 1024


def connect(path: str | Path | DatabaseURL | None = None, *, create: bool = True) -> sqlite3.Connection:
    """Open the results database in WAL mode and migrate it.

    `create=False` is for reading commands (runs, report, export): a database that does not
    exist raises MissingDatabaseError, and neither it nor its folder is created. On a
    PostgreSQL server the database itself must exist (its owner creates it); the store's
    tables are created in it, unless `create=False` and bwtune never wrote there.
    """
    target = database_target(path)
    if isinstance(target, DatabaseURL):
        return _connect_server(target, create=create)
    db_path = target
    if str(db_path) == ":memory:":
        conn = sqlite3.connect(":memory:", isolation_level=None)
    elif create:
        db_path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: transactions are explicit (`schema.transaction`), DDL included.
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
        schema.migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


class _ReadConnection(sqlite3.Connection):
    """A reading command's connection: `notice` says how the database was opened when that
    is worth a line (an older schema read through an upgraded copy in memory)."""

    notice: str | None = None


def _connect_server(target: DatabaseURL, *, create: bool) -> PostgresConnection:
    conn = connect_postgres(target, read_only=False)
    try:
        if not create and schema.schema_version(conn) == 0:
            raise MissingDatabaseError(_no_store(target))
        schema.migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _no_store(target: DatabaseURL) -> str:
    return f"no results store in {target} (bwtune sweep or bwtune import creates it)"


def _connect_server_readonly(target: DatabaseURL) -> PostgresConnection:
    """A reading command's session on the server: read-only there too, never a migration."""
    conn = connect_postgres(target, read_only=True)
    try:
        version = schema.schema_version(conn)
        if version == 0:
            raise MissingDatabaseError(_no_store(target))
        if version > schema.SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"results database schema version {version} is newer than this bwtune "
                f"understands ({schema.SCHEMA_VERSION}); upgrade bwtune"
            )
        if version < schema.SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"results store {target} has schema version {version}, older than this bwtune's "
                f"{schema.SCHEMA_VERSION}; a writing command (bwtune import, bwtune sweep) upgrades it"
            )
    except BaseException:
        conn.close()
        raise
    return conn


def connect_readonly(path: str | Path | DatabaseURL | None = None) -> sqlite3.Connection:
    """Open the results database for a reading command (runs, report, export, baseline show,
    plan): SQLite's `mode=ro`, never a write, never a migration.

    A WAL database whose folder cannot be written (a read-only mount) and that has no -wal
    file (every write checkpointed, no writer at work) is opened `immutable=1`: SQLite then
    needs no -shm file. A database of an older schema is left as it is and read through a
    copy upgraded in memory; the connection's `notice` names the command that upgrades the
    file in place. Missing: MissingDatabaseError; newer: SchemaTooNewError. A PostgreSQL
    store is read in a read-only session; one of an older schema is refused (one line)
    until a writing command upgrades it.
    """
    target = database_target(path)
    if isinstance(target, DatabaseURL):
        return _connect_server_readonly(target)
    db_path = target
    if not db_path.is_file():
        raise MissingDatabaseError(
            f"no results database at {db_path} (bwtune sweep or bwtune import creates it)"
        )
    conn = _open_readonly(db_path)
    try:
        version = schema.schema_version(conn)
        if version > schema.SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"results database schema version {version} is newer than this bwtune "
                f"understands ({schema.SCHEMA_VERSION}); upgrade bwtune"
            )
        if version < schema.SCHEMA_VERSION:
            copy = sqlite3.connect(":memory:", isolation_level=None, factory=_ReadConnection)
            conn.backup(copy)
            conn.close()
            conn = copy
            conn.row_factory = sqlite3.Row
            schema.migrate(conn)
            conn.notice = (
                f"results database {db_path} has schema version {version}, older than this bwtune's "
                f"{schema.SCHEMA_VERSION}: read through an upgraded copy in memory, the file is unchanged; "
                "a writing command (bwtune import, bwtune sweep) upgrades it in place"
            )
        conn.execute("PRAGMA query_only=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def print_notice(conn: StoreConnection, prog: str) -> None:
    """Print a read-only connection's notice (an older schema), if any, as one stderr line."""
    notice = getattr(conn, "notice", None)
    if notice:
        print(f"{prog}: note: {notice}", file=sys.stderr)


def _open_readonly(db_path: Path) -> _ReadConnection:
    uri = db_path.resolve().as_uri()
    wal = Path(f"{db_path}-wal")
    # A WAL reader needs the -shm file, which it creates beside the database: impossible on a
    # read-only folder. Without a -wal file everything is in the database file itself.
    immutable = not wal.exists() and not os.access(db_path.parent, os.W_OK) and _is_wal(db_path)
    conn = sqlite3.connect(
        uri + ("?mode=ro&immutable=1" if immutable else "?mode=ro"),
        uri=True, isolation_level=None, timeout=10.0, factory=_ReadConnection,
    )  # fmt: skip
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.OperationalError as err:
        conn.close()
        if wal.exists() and not os.access(db_path.parent, os.W_OK):
            raise sqlite3.OperationalError(
                f"{err}: {wal} holds writes not yet in the database and its folder is read-only "
                "(SQLite needs to create the -shm file beside it); open it once where it is writable"
            ) from None
        raise
    return conn


def _is_wal(db_path: Path) -> bool:
    """The database file's header says WAL (file format version 2 at offsets 18-19)."""
    try:
        with db_path.open("rb") as handle:
            header = handle.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18:20] == b"\x02\x02"


def check_writable(
    home: Path | None = None,
    db_path: Path | DatabaseURL | None = None,
    *,
    min_free_bytes: int = MIN_FREE_BYTES,
) -> None:
    """Refuse up front (StorageError, one line) a BWTUNE_HOME or results database that could
    not take a run's results: not creatable, read-only, (nearly) full, damaged or too new;
    a PostgreSQL store that cannot be reached or written.

    A sweep calls this before it launches anything, so such a fault never costs a sweep.
    """
    home = home if home is not None else bwtune_home()
    db_path = database_target(db_path)
    _check_folder(home, "BWTUNE_HOME", min_free_bytes)
    if isinstance(db_path, DatabaseURL):
        _check_server(db_path)
        return
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
            with schema.transaction(conn):  # a write that is rolled back: a read-only file fails here
                conn.execute("CREATE TABLE bwtune_write_probe (x INTEGER)")
                raise _RollBack
        except _RollBack:
            pass
        finally:
            conn.close()
    except (sqlite3.DatabaseError, OSError, SchemaTooNewError, MissingDatabaseError) as err:
        raise StorageError(f"results database {db_path}: {err}") from None


def _check_server(target: DatabaseURL) -> None:
    try:
        conn = connect(target)
        try:
            with schema.transaction(conn):  # a write that is rolled back: a read-only role fails here
                conn.execute("CREATE TEMPORARY TABLE bwtune_write_probe (x INTEGER)")
                conn.execute(
                    "INSERT OR IGNORE INTO runs (run_id, created_at, objective_json) VALUES (?, ?, ?)",
                    ("bwtune-write-probe", "", "{}"),
                )
                raise _RollBack
        except _RollBack:
            pass
        finally:
            conn.close()
    except (sqlite3.DatabaseError, OSError, SchemaTooNewError) as err:
        raise StorageError(f"results database {target}: {err}") from None


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
