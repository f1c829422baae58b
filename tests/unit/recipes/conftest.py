"""Fixtures of the recipe tests: a results store made with the store's own import path."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.db.sample_results import sample_results
from tests.unit.recipes.recipe_store import RUN, STACK, make_store


@pytest.fixture
def lines() -> list[dict]:
    found = sample_results(RUN)
    for line in found:
        line["stack"] = dict(STACK)
    return found


@pytest.fixture
def db(tmp_path: Path, lines: list[dict]) -> Iterator[sqlite3.Connection]:
    conn = make_store(tmp_path / "results.db", lines)
    yield conn
    conn.close()
