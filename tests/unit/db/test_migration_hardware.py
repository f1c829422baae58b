"""A result's hardware group in the results database (issue 25). `hardware` is kept in each
result's whole line (results.line_json, schema 2+), so it needs no column and no migration:
a database of an earlier schema still migrates to the declared columns, its old results
read back with `hardware` null, and a line that records it reads it back, in the `--json`
view too, and gives its group to HardwareGroup from the stored result alone."""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract, results_fields
from bwtune import store
from bwtune.analysis.hardware_group import HardwareGroup
from bwtune.store import schema
from tests.unit.db.sample_results import sample_results

EIGHT = {"gpu_model": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "gpu_count": 8, "sm": "sm120",
         "interconnect": "pcie"}  # fmt: skip


def _with_hardware(line: dict[str, Any], **parts: Any) -> dict[str, Any]:
    new = copy.deepcopy(line)
    new["hardware"] = {**EIGHT, **parts}
    return new


def _old_database(path: Path, version: int) -> None:
    """A database as a bwtune of schema `version` left it (its migrations only)."""
    raw = sqlite3.connect(path, isolation_level=None)
    for statement in (s for migration in schema.MIGRATIONS[:version] for s in migration):
        raw.execute(statement)
    raw.execute(f"PRAGMA user_version = {version}")
    raw.close()


def test_hardware_is_kept_in_the_whole_line_not_a_column() -> None:
    field = results_fields.BY_NAME["hardware"]
    assert field.store == "line" and field.column is None
    assert "hardware_json" not in schema.declared_columns("results")


def test_a_database_of_each_earlier_schema_migrates_with_hardware_declared(tmp_path: Path) -> None:
    for version in range(1, schema.SCHEMA_VERSION):
        path = tmp_path / f"v{version}.db"
        _old_database(path, version)
        conn = store.connect(path)
        assert store.schema_version(conn) == store.SCHEMA_VERSION
        assert schema.column_problems(conn) == []
        line = _with_hardware(sample_results()[0], gpu_count=4)
        store.import_results(conn, [line])
        [back] = store.run_results(conn, line["run_id"])
        assert back["hardware"] == line["hardware"]
        conn.close()


def test_old_results_of_a_previous_schema_read_back_without_hardware(tmp_path: Path) -> None:
    # A schema-4 database holding a line an older node wrote (no `hardware` key at all).
    path = tmp_path / "v4.db"
    _old_database(path, 4)
    old = sample_results()[0]
    assert "hardware" not in old
    conn = store.connect(path)
    store.import_results(conn, [old])
    conn.close()
    conn = store.connect(path)
    [back] = store.run_results(conn, old["run_id"])
    assert back.get("hardware") is None
    results_contract.validate_line({k: v for k, v in back.items() if k in results_contract.LINE_DEFAULTS})
    view = store.build_run_output(conn, old["run_id"])
    [shown] = [r for r in view["results"] if r["id"] == old["config_id"] and r["host"] == old["host"]]
    assert "hardware" in shown and shown["hardware"] is None
    # Its group is today's rule: the SM tag and the fingerprint, the rest unknown.
    group = HardwareGroup.of_result(back)
    assert (group.sm, group.gpu_count, group.gpu_model) == ("sm120", None, None)
    conn.close()


def test_a_result_imported_before_whole_lines_were_kept_reads_back_without_hardware(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    _old_database(path, 1)
    line = sample_results()[0]
    key = (line["run_id"], line["host"], line["config_id"])
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("INSERT INTO runs (run_id, created_at, objective_json) VALUES (?, 'x', '{}')", key[:1])
    raw.execute("INSERT INTO hosts (run_id, host) VALUES (?, ?)", key[:2])
    raw.execute("INSERT INTO configs VALUES (?, ?, ?, ?)", (key[2], json.dumps(line["flags"]), "[]", "{}"))
    raw.execute(
        "INSERT INTO results (run_id, host, config_id, status, simulated, gpu, timings_json, reasons_json, "
        "line_sha256) VALUES (?, ?, ?, 'ok', 1, 'sm120', '{}', '[]', 'old')",
        key,
    )
    raw.close()
    conn = store.connect(path)
    [back] = store.run_results(conn, line["run_id"])
    assert back.get("hardware") is None and back["gpu"] == "sm120"
    conn.close()


def test_the_json_view_and_the_group_read_the_stored_hardware(tmp_path: Path) -> None:
    conn = store.connect(tmp_path / "results.db")
    base = sample_results()[0]
    big = _with_hardware(base)
    small = _with_hardware(base, gpu_count=4)
    small["host"] = "gpu-small"
    store.import_results(conn, [big, small])
    view = store.build_run_output(conn, base["run_id"])
    shown = {r["host"]: r for r in view["results"] if r["id"] == base["config_id"]}
    assert shown[big["host"]]["hardware"] == big["hardware"]
    assert shown["gpu-small"]["hardware"] == small["hardware"]
    keys = list(shown[big["host"]])
    assert keys == list(results_fields.VIEW_ORDER)
    # From the stored results (and from their --json view) alone: two groups of one SM.
    stored = {
        r["host"]: r for r in store.run_results(conn, base["run_id"]) if r["config_id"] == base["config_id"]
    }
    for pair in ((stored[big["host"]], stored["gpu-small"]), (shown[big["host"]], shown["gpu-small"])):
        one, other = (HardwareGroup.of_result(r) for r in pair)
        assert one.sm == other.sm == "sm120"
        assert not one.same_hardware(other) and one.key() != other.key()
    conn.close()
