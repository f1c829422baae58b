from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from bwtune import results_db
from bwtune.store import schema
from tests.unit.db.sample_results import FAILURES, sample_results, write_jsonl


def _counts(conn: sqlite3.Connection) -> dict[str, int]:
    tables = ("runs", "hosts", "stacks", "configs", "results", "workload_values", "failures")
    return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}


def _dump(conn: sqlite3.Connection) -> list[tuple]:
    """Every row of every table, in order (SQLite's iterdump; the same rows by query on
    PostgreSQL, which has no iterdump)."""
    if isinstance(conn, sqlite3.Connection):
        return [(line,) for line in conn.iterdump()]
    tables = ("runs", "hosts", "stacks", "configs", "results", "workload_values", "failures",
              "superseded_results", "run_tags", "baselines")  # fmt: skip
    return sorted((t, *map(repr, row)) for t in tables for row in conn.execute(f"SELECT * FROM {t}"))


def test_connect_creates_wal_database_at_current_schema(tmp_path: Path) -> None:
    conn = results_db.connect(tmp_path / "sub" / "results.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert results_db.schema_version(conn) == results_db.SCHEMA_VERSION >= 1
    # Reopening migrates nothing and keeps the version.
    conn.close()
    assert (
        results_db.schema_version(results_db.connect(tmp_path / "sub" / "results.db"))
        == results_db.SCHEMA_VERSION
    )


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {results_db.SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(results_db.SchemaTooNewError, match="newer than this bwtune"):
        results_db.connect(path)


def test_migration_upgrades_an_older_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "results.db"
    results_db.connect(path).close()
    extra = (*results_db.MIGRATIONS, ("ALTER TABLE runs ADD COLUMN note TEXT",))
    monkeypatch.setattr(schema, "MIGRATIONS", extra)  # the store's migrations live in bwtune.store.schema
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(extra))
    conn = results_db.connect(path)
    assert results_db.schema_version(conn) == len(extra)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    assert "note" in columns


def test_default_path_follows_bwtune_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    assert results_db.default_db_path() == tmp_path / "home" / "results.db"
    assert results_db.run_dir("r1") == tmp_path / "home" / "runs" / "r1"
    monkeypatch.setenv("BWTUNE_DB", str(tmp_path / "elsewhere.db"))
    assert results_db.default_db_path() == tmp_path / "elsewhere.db"


def test_import_round_trips_every_line(db: sqlite3.Connection, sample: list[dict]) -> None:
    summary = results_db.import_results(db, sample)
    assert (summary.added, summary.updated, summary.unchanged) == (len(sample), 0, 0)
    stored = results_db.run_results(db, "r20261130-demo")
    key = lambda r: (r["host"], r["config_id"])  # noqa: E731
    assert sorted(stored, key=key) == sorted(sample, key=key)


def test_import_twice_changes_nothing(db: sqlite3.Connection, sample: list[dict], tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "results.jsonl", sample)
    results_db.import_results_file(db, path)
    before = _counts(db)
    dump_before = _dump(db)
    again = results_db.import_results_file(db, path)
    assert (again.added, again.updated, again.unchanged) == (0, 0, len(sample))
    assert _counts(db) == before
    assert _dump(db) == dump_before


def test_changed_line_becomes_current_and_keeps_the_old_measurement(
    db: sqlite3.Connection, sample: list[dict]
) -> None:
    results_db.import_results(db, sample)
    before = _counts(db)
    rerun = json.loads(json.dumps(sample[0]))
    rerun["metrics"]["chat-1k"]["values"]["output_throughput"] = 9999.0
    summary = results_db.import_results(db, [rerun])
    assert summary.updated == 1
    assert _counts(db) == before
    stored = {r["config_id"]: r for r in results_db.run_results(db, rerun["run_id"]) if r["host"] == "gpu-a"}
    assert stored[rerun["config_id"]]["metrics"]["chat-1k"]["values"]["output_throughput"] == 9999.0
    [earlier] = results_db.superseded_results(db, rerun["run_id"])  # the old measurement is kept
    assert (
        earlier["attempt"] == 1
        and {k: v for k, v in earlier.items() if k not in ("attempt", "superseded_at")} == sample[0]
    )


def test_two_hosts_merge_into_one_run(db: sqlite3.Connection, sample: list[dict]) -> None:
    host_a = [r for r in sample if r["host"] == "gpu-a"]
    host_b = [r for r in sample if r["host"] == "gpu-b"]
    results_db.import_results(db, host_a)
    results_db.import_results(db, host_b)
    assert [h["host"] for h in results_db.run_hosts(db, "r20261130-demo")] == ["gpu-a", "gpu-b"]
    assert len(results_db.run_results(db, "r20261130-demo")) == len(sample)
    # The shared configs are stored once; each host keeps its own measurements.
    shared = {r["config_id"] for r in host_b}
    assert db.execute("SELECT COUNT(*) FROM configs").fetchone()[0] == len({r["config_id"] for r in sample})
    rows = db.execute(
        "SELECT COUNT(DISTINCT host) FROM workload_values WHERE config_id = ?", (next(iter(shared)),)
    ).fetchone()
    assert rows[0] == 2
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_run_id_override(db: sqlite3.Connection, sample: list[dict]) -> None:
    summary = results_db.import_results(db, sample, run_id="renamed")
    assert summary.run_ids == ("renamed",)
    assert len(results_db.run_results(db, "renamed")) == len(sample)
    with pytest.raises(results_db.UnknownRunError, match="r20261130-demo"):
        results_db.run_results(db, "r20261130-demo")


def test_measurements_are_per_workload_metric_and_repetition(
    db: sqlite3.Connection, sample: list[dict]
) -> None:
    results_db.import_results(db, sample)
    first = sample[0]
    [back] = [r for r in results_db.run_results(db, first["run_id"]) if r["config_id"] == first["config_id"]
              and r["host"] == first["host"]]  # fmt: skip
    got = [
        (w, i, rep["output_throughput"])
        for w in sorted(back["metrics"])
        for i, rep in enumerate(back["metrics"][w]["repetitions"])
    ]
    expected = [
        (w, i, rep["output_throughput"])
        for w in sorted(first["metrics"])
        for i, rep in enumerate(first["metrics"][w]["repetitions"])
    ]
    assert got == expected and len(got) == 6  # 2 workloads x 3 repetitions
    # One row per result and workload holds the values queries rank by (schema 4).
    rows = db.execute(
        "SELECT workload, values_json FROM workload_values WHERE host = ? AND config_id = ? "
        "ORDER BY workload",
        (first["host"], first["config_id"]),
    ).fetchall()
    assert [(w, json.loads(v)) for w, v in rows] == [
        (w, first["metrics"][w]["values"]) for w in sorted(first["metrics"])
    ]


def test_failures_keep_class_message_and_log_tail(db: sqlite3.Connection, sample: list[dict]) -> None:
    results_db.import_results(db, sample)
    rows = db.execute("SELECT class, message, log_tail_json FROM failures ORDER BY class").fetchall()
    assert sorted(r["class"] for r in rows) == sorted(FAILURES)
    for row in rows:
        assert row["message"] == FAILURES[row["class"]]
        tail = json.loads(row["log_tail_json"])
        assert len(tail) == 50 and tail[-1] == FAILURES[row["class"]]


def test_record_run_stores_matrix_objective_and_plan(db: sqlite3.Connection, sample: list[dict]) -> None:
    results_db.import_results(db, sample)
    matrix = {"objective": {"workload": "long-8k", "metric": "mean_tpot_ms", "goal": "min"}, "axes": {}}
    results_db.record_run(db, "r20261130-demo", matrix=matrix, plan_summary={"valid": 13, "pruned": 1})
    run = results_db.get_run(db, "r20261130-demo")
    assert run.matrix == matrix
    assert run.objective == {"workload": "long-8k", "metric": "mean_tpot_ms", "goal": "min"}
    assert run.plan_summary == {"valid": 13, "pruned": 1}
    with pytest.raises(ValueError, match="'most'"):
        results_db.record_run(db, "r20261130-demo", objective={"metric": "x", "goal": "most"})


def test_host_facts_and_stack_details(db: sqlite3.Connection, sample: list[dict]) -> None:
    results_db.import_results(db, sample)
    facts = {"count": 8, "name": "NVIDIA RTX PRO 6000 Blackwell", "memory_mib": 97887, "driver": "580.95"}
    results_db.record_host_facts(
        db, "r20261130-demo", "gpu-a", gpu_facts=facts, stack_fingerprint=sample[0]["stack_fingerprint"],
        stack={"sglang_version": "0.5.23", "torch": "2.9.1+cu130"},
    )  # fmt: skip
    hosts = {h["host"]: h for h in results_db.run_hosts(db, "r20261130-demo")}
    assert hosts["gpu-a"]["gpu_facts"] == facts
    assert hosts["gpu-a"]["stack"] == {"sglang_version": "0.5.23", "torch": "2.9.1+cu130"}
    assert hosts["gpu-b"]["gpu_facts"] is None
    assert hosts["gpu-b"]["sglang_version"] == "0.5.23"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.update(status="exploded"), "status 'exploded' is not one of ok, pruned"),
        (lambda r: r.update(schema=2), "schema 2 is not supported"),
        (lambda r: r.pop("host"), "missing key 'host'"),
        (lambda r: r["metrics"]["chat-1k"]["values"].update(output_throughput="fast"),
         "metrics['chat-1k'].values['output_throughput'] must be a number, got 'fast'"),
        (lambda r: r.update(status="oom"), "status 'oom' needs a failure object"),
    ],
)  # fmt: skip
def test_bad_lines_name_file_line_and_value(tmp_path: Path, sample: list[dict], mutate, message: str) -> None:
    bad = json.loads(json.dumps(sample[0]))
    mutate(bad)
    path = write_jsonl(tmp_path / "results.jsonl", [sample[1], bad])
    with pytest.raises(results_db.ResultsFormatError) as info:
        results_db.read_results_file(path)
    text = str(info.value)
    assert text.startswith(f"{path}:2: ") and message in text
    assert "\n" not in text


def test_invalid_json_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("\n{not json\n")
    with pytest.raises(results_db.ResultsFormatError, match=r"r.jsonl:2: not a JSON line"):
        results_db.read_results_file(path)


def test_build_run_output_shape_and_best(db: sqlite3.Connection, sample: list[dict]) -> None:
    results_db.import_results(db, sample)
    out = results_db.build_run_output(db, "r20261130-demo")
    assert set(out) == {"schema", "run_id", "results", "best", "summary"}
    assert out["schema"] == results_contract.OUTPUT_SCHEMA_VERSION
    assert len(out["results"]) == len(sample)
    for result in out["results"]:
        assert {"id", "host", "status", "flags", "failure", "metrics"} <= set(result)
    # The wrong-output config is the fastest of all, but it can never win.
    wrong = next(r for r in out["results"] if r["status"] == "wrong-output")
    assert wrong["objective"] > max(r["objective"] for r in out["results"] if r["status"] == "ok")
    best = out["best"]
    assert best in out["results"] and best["status"] == "ok"
    assert best["objective"] == max(r["objective"] for r in out["results"] if r["status"] == "ok")
    assert best["flags"]["moe-runner-backend"] == "flashinfer_trtllm"
    summary = out["summary"]
    assert summary["objective"] == {"workload": "chat-1k", "metric": "output_throughput", "goal": "max"}
    # Failed counts launched configs only: the plan's pruned and duplicate rows are apart.
    launched = sorted(c for c in FAILURES if c not in ("pruned", "duplicate"))
    assert summary["ok"] == 7 and summary["failed"] == {c: 1 for c in launched}
    assert summary["not_launched"] == {"duplicate": 1, "pruned": 1} and summary["launched"] == 13
    assert summary["hosts"] == ["gpu-a", "gpu-b"] and summary["simulated"] is True
    json.dumps(out)  # serialisable as printed by --json


def test_goal_min_picks_the_lowest(db: sqlite3.Connection, sample: list[dict]) -> None:
    results_db.import_results(db, sample)
    results_db.record_run(db, "r20261130-demo", objective={"workload": "long-8k", "metric": "mean_tpot_ms",
                                                           "goal": "min"})  # fmt: skip
    out = results_db.build_run_output(db, "r20261130-demo")
    ok = [r for r in out["results"] if r["status"] == "ok"]
    assert out["best"]["objective"] == min(r["objective"] for r in ok)


def test_no_ok_result_means_no_best(db: sqlite3.Connection) -> None:
    failed = [r for r in sample_results() if r["status"] != "ok"]
    results_db.import_results(db, failed)
    assert results_db.build_run_output(db, "r20261130-demo")["best"] is None


def test_list_runs(db: sqlite3.Connection) -> None:
    results_db.import_results(db, sample_results("r-old"))
    later = sample_results("r-new", simulated=False)
    for line in later:
        line["started_at"] = line["started_at"].replace("2026-11-30", "2026-12-01")
    results_db.import_results(db, later)
    runs = results_db.list_runs(db)
    assert [r["run_id"] for r in runs] == ["r-new", "r-old"]
    assert runs[0]["simulated"] is False and runs[1]["simulated"] is True
    assert runs[0]["results"] == 15 and runs[0]["ok"] == 7 and runs[0]["failed"] == 6
    assert runs[0]["not_launched"] == 2
    assert runs[0]["best"]["id"].startswith("c")


def test_a_version_1_database_with_results_migrates_and_keeps_them(
    tmp_path: Path, sample: list[dict]
) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    for statement in results_db.MIGRATIONS[0]:
        raw.execute(statement)
    line = sample[0]
    raw.execute(
        "INSERT INTO runs (run_id, created_at, objective_json) VALUES (?, 'x', '{}')", (line["run_id"],)
    )
    raw.execute("INSERT INTO hosts (run_id, host) VALUES (?, ?)", (line["run_id"], line["host"]))
    raw.execute(
        "INSERT INTO configs VALUES (?, ?, ?, ?)",
        (line["config_id"], json.dumps(line["flags"]), json.dumps(line["argv"]), json.dumps(line["point"])),
    )
    raw.execute(
        "INSERT INTO results (run_id, host, config_id, status, simulated, timings_json, reasons_json, "
        "line_sha256) VALUES (?, ?, ?, 'ok', 1, '{}', '[]', 'old')",
        (line["run_id"], line["host"], line["config_id"]),
    )
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    conn = results_db.connect(path)
    assert results_db.schema_version(conn) == results_db.SCHEMA_VERSION
    [old] = results_db.run_results(conn, line["run_id"])
    assert old["launch_command"] == [] and old["screened_out"] is False and old["release"] is None
    summary = results_db.import_results(conn, [line])  # the same config, now with every field
    assert [r.attempt for r in summary.replaced] == [2]
    assert [r["config_id"] for r in results_db.superseded_results(conn, line["run_id"])] == [
        line["config_id"]
    ]
    [new] = results_db.run_results(conn, line["run_id"])
    assert new == line


def test_runs_of_one_config_with_different_model_paths_keep_their_own_argv(
    db: sqlite3.Connection, sample: list[dict]
) -> None:
    """Issue 20 #19: a config id is a hash of the flags alone, so two runs of the same flags
    with the checkpoint in different places share it; each keeps its own argv."""
    line = next(r for r in sample if r["status"] == "ok")
    here = {**line, "run_id": "r-here"}
    there = {**line, "run_id": "r-there", "argv": ["--model-path", "/srv/elsewhere", *line["argv"][2:]]}
    results_db.import_results(db, [here, there])
    assert db.execute("SELECT COUNT(*) FROM configs").fetchone()[0] == 1
    [a] = results_db.run_results(db, "r-here")
    [b] = results_db.run_results(db, "r-there")
    assert a["argv"] == line["argv"] and b["argv"] == there["argv"]
    [out] = results_db.build_run_output(db, "r-there")["results"]
    assert out["argv"][:2] == ["--model-path", "/srv/elsewhere"]


def test_a_speculative_launchs_accept_length_is_in_the_json_view(
    db: sqlite3.Connection, sample: list[dict]
) -> None:
    """Issue 26: the accept length a speculative launch measured reaches `--json` at the top
    of its result (null where the benchmark reported none)."""
    ok = [r for r in sample if r["status"] == "ok"][:2]
    spec = {**ok[0], "run_id": "r-spec", "accept_length": 2.84}
    plain = {**ok[1], "run_id": "r-spec"}
    results_db.import_results(db, [spec, plain])
    by_id = {r["id"]: r for r in results_db.build_run_output(db, "r-spec")["results"]}
    assert by_id[spec["config_id"]]["accept_length"] == 2.84
    assert by_id[plain["config_id"]]["accept_length"] is None
