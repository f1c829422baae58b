from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bwtune import results_db
from tests.unit.db.sample_results import sample_results
from tests.unit.store.postgres_server import PostgresServer, postgres_server

__all__ = ["postgres_server"]  # the fixture, for the tests of this folder

# Each store test runs on both backends; the PostgreSQL run starts a real server, so it is in
# the integration tier (make test runs it; the fast loop keeps to SQLite).
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)]


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """The store, on each backend: a SQLite file, and a fresh database on a real PostgreSQL
    server (tests/unit/store/postgres_server.py)."""
    if request.param == "sqlite":
        conn = results_db.connect(tmp_path / "results.db")
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        conn = results_db.connect(server.fresh_database())
    yield conn
    conn.close()


@pytest.fixture(params=BACKENDS)
def new_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[str], sqlite3.Connection]]:
    """Opens new empty stores by name, on each backend (SQLite files, PostgreSQL databases);
    closes them after the test."""
    opened: list[sqlite3.Connection] = []

    def make(name: str) -> sqlite3.Connection:
        if request.param == "sqlite":
            conn = results_db.connect(tmp_path / f"{name}.db")
        else:
            conn = results_db.connect(request.getfixturevalue("postgres_server").fresh_database())
        opened.append(conn)
        return conn

    yield make
    for conn in opened:
        conn.close()


@pytest.fixture(params=BACKENDS)
def home(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$BWTUNE_HOME for the commands' tests, on each backend: its results.db (no $BWTUNE_DB),
    and an empty store on a real PostgreSQL server named by $BWTUNE_DB."""
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    if request.param == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        url = server.fresh_database()
        results_db.connect(url).close()  # an empty store, as the default file is before any sweep
        monkeypatch.setenv("BWTUNE_DB", url)
    return tmp_path / "home"


def stored_runs() -> list[str]:
    """The runs in the store the commands use ($BWTUNE_DB, else $BWTUNE_HOME's), none when
    there is no store."""
    try:
        conn = results_db.connect_readonly()
    except results_db.MissingDatabaseError:
        return []
    try:
        return [run["run_id"] for run in results_db.list_runs(conn)]
    finally:
        conn.close()


@pytest.fixture
def sample() -> list[dict]:
    return sample_results()
