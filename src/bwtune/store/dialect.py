"""The store's one seam between SQLite and PostgreSQL: the few places their SQL differs.

Every query of the store is written once, in SQLite's SQL (the store's first backend).
On PostgreSQL, `postgres_statement` rewrites a statement's placeholders (`?` -> `%s`),
SQLite's `INSERT OR IGNORE` / `INSERT OR REPLACE` (-> `ON CONFLICT`) and a migration's
column types (`REAL`, a 4-byte float there, -> `DOUBLE PRECISION`). What a rewrite cannot
say, reading into the JSON a column keeps, is asked of the connection's `Dialect`
(`dialect_of(conn)`): `json_text`, `json_type`, `json_value`, `is_number`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

# A table's primary key, for `INSERT OR REPLACE` on PostgreSQL (ON CONFLICT names it).
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",),
    "stacks": ("fingerprint",),
    "hosts": ("run_id", "host"),
    "configs": ("config_id",),
    "results": ("run_id", "host", "config_id"),
    "failures": ("run_id", "host", "config_id"),
    "superseded_results": ("run_id", "host", "config_id", "attempt"),
    "run_tags": ("run_id", "tag"),
    "baselines": ("name",),
    "workload_values": ("run_id", "host", "config_id", "workload"),
}


class Dialect:
    """SQLite's SQL for reading JSON kept as text (`json_extract`, `json_type`, `typeof`)."""

    name = "sqlite"

    def json_text(self, doc: str, key: str) -> str:
        """The JSON text (an object's, or a string's value) of `doc`'s top-level `key` (a
        name), NULL where it has none."""
        return f"json_extract({doc}, '$.{key}')"

    def json_type(self, doc: str, key: str) -> str:
        """'object', 'array', ... of `doc`'s top-level `key` (SQLite's json_type names)."""
        return f"json_type({doc}, '$.{key}')"

    def json_value(self, doc: str, *keys: str) -> str:
        """The value at a path of keys (SQL expressions: a column, a quoted name) into `doc`:
        a number comes back a number, a string its text."""
        path = " || '.' || ".join(f"'\"' || {key} || '\"'" for key in keys)
        return f"json_extract({doc}, '$.' || {path})"

    def is_number(self, value: str) -> str:
        """Whether a `json_value` is a JSON number."""
        return f"typeof({value}) IN ('integer', 'real')"

    def number(self, value: str) -> str:
        """A `json_value` known to be a number, as a float."""
        return value


class PostgresDialect(Dialect):
    """PostgreSQL's: the text columns read as jsonb through `bwtune_json` (NULL for text that
    is no JSON PostgreSQL takes, such as a NaN)."""

    name = "postgresql"

    def json_text(self, doc: str, key: str) -> str:
        return f"(bwtune_json({doc}) ->> '{key}')"

    def json_type(self, doc: str, key: str) -> str:
        return f"jsonb_typeof(bwtune_json({doc}) -> '{key}')"

    def json_value(self, doc: str, *keys: str) -> str:
        return f"(bwtune_json({doc}) -> {' -> '.join(keys)})"

    def is_number(self, value: str) -> str:
        return f"jsonb_typeof({value}) = 'number'"

    def number(self, value: str) -> str:
        return f"({value})::double precision"


SQLITE = Dialect()
POSTGRESQL = PostgresDialect()

# Created with a PostgreSQL store (not a migration: SQLite has json_extract built in).
POSTGRES_FUNCTIONS = (
    """CREATE OR REPLACE FUNCTION bwtune_json(doc text) RETURNS jsonb
       LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
       BEGIN
           RETURN doc::jsonb;
       EXCEPTION WHEN others THEN
           RETURN NULL;
       END $$""",
)


def dialect_of(conn: Any) -> Dialect:
    """The dialect of a store connection (a sqlite3 connection has none of its own)."""
    return getattr(conn, "dialect", SQLITE)


_LITERAL = re.compile(r"('(?:[^']|'')*')")
_OR_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\s", re.IGNORECASE)
_OR_REPLACE = re.compile(r"^\s*INSERT\s+OR\s+REPLACE\s+INTO\s+(\w+)\s*\(([^)]*)\)", re.IGNORECASE)
_REAL = re.compile(r"\bREAL\b")
_DDL = re.compile(r"^\s*(CREATE|ALTER)\s+TABLE\s", re.IGNORECASE)


@lru_cache(maxsize=512)
def postgres_statement(sql: str) -> str:
    """SQLite's statement as PostgreSQL (psycopg) takes it: `?` -> `%s` (and `%` -> `%%`)
    outside string literals, SQLite's upserts as ON CONFLICT, REAL columns as DOUBLE
    PRECISION. ValueError for an INSERT OR REPLACE into a table without a known key."""
    suffix = ""
    if _OR_IGNORE.match(sql):
        sql = _OR_IGNORE.sub("INSERT INTO ", sql, count=1)
        suffix = " ON CONFLICT DO NOTHING"
    elif (replace := _OR_REPLACE.match(sql)) is not None:
        table, columns = replace.group(1), [c.strip() for c in replace.group(2).split(",")]
        if table not in PRIMARY_KEYS:
            raise ValueError(f"INSERT OR REPLACE INTO {table}: the dialect knows no primary key of {table}")
        key = PRIMARY_KEYS[table]
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in key)
        action = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
        sql = re.sub(r"^\s*INSERT\s+OR\s+REPLACE\s+INTO", "INSERT INTO", sql, count=1, flags=re.IGNORECASE)
        suffix = f" ON CONFLICT ({', '.join(key)}) {action}"
    ddl = bool(_DDL.match(sql))
    parts = _LITERAL.split(sql)
    for index in range(0, len(parts), 2):  # the even parts are outside string literals
        text = parts[index].replace("%", "%%").replace("?", "%s")
        parts[index] = _REAL.sub("DOUBLE PRECISION", text) if ddl else text
    for index in range(1, len(parts), 2):
        parts[index] = parts[index].replace("%", "%%")
    return "".join(parts).rstrip().rstrip(";") + suffix
