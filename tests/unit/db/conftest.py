from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from bwtune import results_db
from tests.unit.db.sample_results import sample_results
from tests.unit.store.postgres_server import PostgresServer, postgres_server

__all__ = ["postgres_server"]  # the fixture, for the tests of this folder


@pytest.fixture(params=["sqlite", "postgresql"])
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


@pytest.fixture
def sample() -> list[dict]:
    return sample_results()
