"""The results store on a PostgreSQL server, through psycopg 3: a connection that takes the
store's statements as a sqlite3 connection does (`execute`, `executemany`, rows read by
name or position), so every module of the store runs on it unchanged.

Statements pass through dialect.postgres_statement; bound values are sent by psycopg's
client-side binding (as SQLite binds them: no server-side type guess for `? IS NULL`),
a bool as the 0/1 SQLite keeps. psycopg's errors come back as sqlite3's classes
(OperationalError, IntegrityError, DatabaseError), so a command's handlers of the store's
errors need no second list, with the server's message and never the URL's password.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from bwtune.store.dialect import POSTGRESQL, postgres_statement
from bwtune.store.paths import DatabaseURL

INSTALL_HINT = "pip install 'psycopg[binary]>=3.1'"
LOCK_TIMEOUT_MS = 300_000  # how long a writer waits for another controller's transaction
# pg_advisory_xact_lock's key: one writer at a time, as SQLite's BEGIN IMMEDIATE (ASCII "bwtu").
WRITER_LOCK = 0x62777475


class PostgresOperationalError(sqlite3.OperationalError):
    """The server could not be reached, or refused (a lock timeout, a read-only session)."""


class PostgresIntegrityError(sqlite3.IntegrityError):
    """A constraint the store's schema declares."""


class PostgresDatabaseError(sqlite3.DatabaseError):
    """Any other error of the server or of psycopg."""


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise PostgresOperationalError(
            f"a postgresql:// results store needs psycopg 3, which is not installed: {INSTALL_HINT}"
        ) from None
    return psycopg


class Row:
    """A row as sqlite3.Row gives it: by position, by column name (any case), `keys()`."""

    __slots__ = ("_names", "_values")

    def __init__(self, names: dict[str, int], values: Sequence[Any]) -> None:
        self._names = names
        self._values = tuple(values)

    def __getitem__(self, key: int | str | slice) -> Any:
        if isinstance(key, str):
            return self._values[self._names[key.lower()]]
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._names)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Row) and other._values == self._values

    def __hash__(self) -> int:
        return hash(self._values)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._names, self._values, strict=True))!r})"


def _row_factory(cursor: Any) -> Any:
    names: dict[str, int] = {}
    for index, column in enumerate(cursor.description or ()):
        names.setdefault(column.name.lower(), index)
    return lambda values: Row(names, values)


def _value(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def _params(params: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(_value(value) for value in params)


class PostgresConnection:
    """A store connection to a PostgreSQL server (autocommit: transactions are explicit,
    `schema.transaction`)."""

    dialect = POSTGRESQL

    def __init__(self, raw: Any, target: DatabaseURL, *, read_only: bool) -> None:
        self._raw = raw
        self.target = target
        self.read_only = read_only
        self.notice: str | None = None

    def _error(self, err: Exception) -> sqlite3.DatabaseError:
        psycopg = _psycopg()
        message = _masked(str(err).strip() or type(err).__name__, self.target)
        if isinstance(err, psycopg.errors.IntegrityError):
            return PostgresIntegrityError(message)
        if isinstance(err, psycopg.OperationalError | psycopg.errors.ReadOnlySqlTransaction):
            return PostgresOperationalError(message)
        return PostgresDatabaseError(message)

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Any:
        psycopg = _psycopg()
        try:
            return self._raw.execute(postgres_statement(sql), _params(params))
        except psycopg.Error as err:
            raise self._error(err) from None

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> Any:
        psycopg = _psycopg()
        batch = [_params(row) for row in rows]
        cursor = psycopg.Cursor(self._raw)  # server-side binding: no client-side query cache per batch
        if not batch:
            return cursor
        try:
            cursor.executemany(postgres_statement(sql), batch)
        except psycopg.Error as err:
            raise self._error(err) from None
        return cursor

    def begin_write(self) -> None:
        """Start a writing transaction, one writer at a time across every controller."""
        self.execute("BEGIN")
        self.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
        # Keyed by the store's schema too: stores in other schemas of the database do not wait.
        self.execute(f"SELECT pg_advisory_xact_lock({WRITER_LOCK}, hashtext(current_schema()))")

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> PostgresConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _masked(message: str, target: DatabaseURL) -> str:
    """A message with the URL's password, should the server or libpq repeat it, masked."""
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(target.url).password
    except ValueError:
        password = None
    message = message.replace(target.url, target.masked)
    if password:
        message = message.replace(unquote(password), "***").replace(password, "***")
    return message


def connect_postgres(target: DatabaseURL, *, read_only: bool) -> PostgresConnection:
    """Open the store on the server `target` names (not migrated here: connection.connect
    migrates). A reading command's session is read-only on the server's side too."""
    psycopg = _psycopg()
    try:
        raw = psycopg.connect(
            target.url, autocommit=True, connect_timeout=10, cursor_factory=psycopg.ClientCursor,
            row_factory=_row_factory, application_name="bwtune",
        )  # fmt: skip
        if read_only:  # (not `options=`: that would replace the URL's own, e.g. its search_path)
            raw.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    except psycopg.Error as err:
        detail = _masked(str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__, target)
        raise PostgresOperationalError(f"cannot connect to {target.masked}: {detail}") from None
    except ValueError as err:  # a URL psycopg cannot parse
        raise PostgresOperationalError(f"{target.masked}: {_masked(str(err), target)}") from None
    return PostgresConnection(raw, target, read_only=read_only)
