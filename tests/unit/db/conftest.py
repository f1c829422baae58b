from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from bwtune import results_db
from tests.unit.db.sample_results import sample_results


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = results_db.connect(tmp_path / "results.db")
    yield conn
    conn.close()


@pytest.fixture
def sample() -> list[dict]:
    return sample_results()
