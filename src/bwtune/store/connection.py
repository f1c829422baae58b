"""Opening the results database: for writing (created and migrated on open), for reading
only (never a write, never a migration), and the up-front check that a sweep's results
will have somewhere to go."""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
from pathlib import Path

from bwtune.store import schema
from bwtune.store.errors import MissingDatabaseError, SchemaTooNewError, StorageError
from bwtune.store.paths import bwtune_home, default_db_path

# bwtune refuses to start a sweep with less than this free where it keeps the database and reports.
MIN_FREE_BYTES = 16 * 1024 * 1024


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


def connect_readonly(path: str | Path | None = None) -> sqlite3.Connection:
    """Open the results database for a reading command (runs, report, export, baseline show,
    plan): SQLite's `mode=ro`, never a write, never a migration.

    A WAL database whose folder cannot be written (a read-only mount) and that has no -wal
    file (every write checkpointed, no writer at work) is opened `immutable=1`: SQLite then
    needs no -shm file. A database of an older schema is left as it is and read through a
    copy upgraded in memory; the connection's `notice` names the command that upgrades the
    file in place. Missing: MissingDatabaseError; newer: SchemaTooNewError.
    """
    db_path = Path(path) if path is not None else default_db_path()
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


def print_notice(conn: sqlite3.Connection, prog: str) -> None:
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
            with schema.transaction(conn):  # a write that is rolled back: a read-only file fails here
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
