"""The results store's shape (issue 22): the schema the migrations build is the one the field
table declares, the store holds every SQL statement of bwtune, its modules stay small, and
`bwtune runs` reads all runs by a fixed number of queries."""

from __future__ import annotations

import ast
import copy
import dataclasses
import sqlite3
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_fields
from bwtune import store
from bwtune.store import lines, schema
from tests.unit.db.sample_results import sample_results

SRC = Path(__file__).resolve().parents[3] / "src" / "bwtune"
STORE = SRC / "store"
MAX_LINES = 500


def test_a_new_database_has_the_declared_columns(tmp_path: Path) -> None:
    conn = store.connect(tmp_path / "results.db")
    assert schema.column_problems(conn) == []


def test_a_version_1_database_migrates_to_the_declared_columns(tmp_path: Path) -> None:
    raw = sqlite3.connect(tmp_path / "old.db")
    for statement in schema.MIGRATIONS[0]:
        raw.execute(statement)
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    assert schema.column_problems(store.connect(tmp_path / "old.db")) == []


def test_a_field_with_a_column_but_no_migration_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = dataclasses.replace(
        results_fields.BY_NAME["gpu"], name="gpu_clock", column="gpu_clock", sql="REAL", json=None
    )
    monkeypatch.setattr(results_fields, "FIELDS", (*results_fields.FIELDS, extra))
    conn = store.connect(":memory:")
    assert schema.column_problems(conn) == [
        "results.gpu_clock: the database has None, declared ('REAL', False, None)"
    ]


def test_the_inserts_write_every_column_of_the_migrated_tables() -> None:
    conn = store.connect(":memory:")
    for table, written in (("results", lines.RESULT_COLUMNS), ("configs", lines.CONFIG_COLUMNS)):
        assert sorted(written) == sorted(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))


def test_a_line_survives_its_rows_field_by_field() -> None:
    """Every field stored in a column reads back as it was (the codecs are each other's inverse)."""
    conn = store.connect(":memory:")
    line = copy.deepcopy(sample_results()[0])
    line["stack_fingerprint"] = ""  # stored as NULL ("nonempty")
    store.import_results(conn, [line])
    conn.execute("UPDATE results SET line_json = NULL")  # read from the columns alone
    [back] = store.run_results(conn, line["run_id"], [(line["host"], line["config_id"])])
    stored = [f for f in results_fields.FIELDS if f.store in ("results", "configs")]
    assert {f.name: back[f.name] for f in stored} == {
        f.name: (line[f.name] or None) if f.codec == "nonempty" else line[f.name] for f in stored
    }


def _sql_calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.relative_to(SRC.parent)}:{node.lineno} calls .{node.func.attr}()"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("execute", "executemany", "executescript")
    ]


def test_sql_lives_in_the_store_only() -> None:
    outside = [
        call
        for path in sorted(SRC.rglob("*.py"))
        if STORE not in path.parents and "__pycache__" not in path.parts
        for call in _sql_calls(path)
    ]
    assert outside == []
    assert _sql_calls(STORE / "queries.py")  # the check sees a call where there is one


def test_no_store_module_is_over_the_limit() -> None:
    sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in STORE.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
    # bwtune.results_db is a re-export of the store, nothing more.
    assert len((SRC / "results_db.py").read_text(encoding="utf-8").splitlines()) < 10


def _queries_of_list_runs(runs: int) -> int:
    conn = store.connect(":memory:")
    base = sample_results()
    for n in range(runs):
        store.import_results(conn, base, run_id=f"r{n}")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    listed = store.list_runs(conn)
    conn.set_trace_callback(None)
    assert len(listed) == runs
    return len(statements)


def test_list_runs_reads_every_run_by_a_fixed_number_of_queries() -> None:
    assert _queries_of_list_runs(2) == _queries_of_list_runs(12)
