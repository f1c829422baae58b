"""The results store at scale (issue 21 #15): the import streams a file in batches, `runs`
counts and ranks by query (a fixed number of queries whatever the number of runs), the
report of a big run is paged, and schema 4 keeps what schema 3 stored. The speed targets
are measured by benchmarks/store_scale.py (docs/benchmarks.md), never here."""

from __future__ import annotations

import copy
import json
import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import results_db
from bwtune.cli import main
from bwtune.report import load_report, model, render_html, render_markdown
from bwtune.store import files as store_files
from tests.unit.db.sample_results import sample_results, write_jsonl


def _many(count: int, run_id: str = "r-big") -> list[dict[str, Any]]:
    """`count` lines of one run: the sample's lines again and again, each its own config."""
    base = sample_results(run_id)
    out = []
    for n in range(count):
        line = copy.deepcopy(base[n % len(base)])
        line["config_id"] = f"c{n:010x}"
        line["point"] = {**line["point"], "n": n}
        line["host"] = ("gpu-a", "gpu-b", "gpu-c")[n % 3]
        if line["status"] == "ok":  # values spread out, so the ranking means something
            for block in line["metrics"].values():
                block["values"]["output_throughput"] = 1000.0 + (n * 37) % 1009
        out.append(line)
    return out


# -- streaming import


def test_import_streams_the_file_and_stores_what_a_whole_import_stores(tmp_path: Path, new_store) -> None:
    lines = _many(600)
    path = write_jsonl(tmp_path / "big.jsonl", lines)
    size = path.stat().st_size
    conn = new_store("streamed")
    tracemalloc.start()
    summary = results_db.import_results_file(conn, path, batch=20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (summary.added, summary.updated, summary.unchanged) == (600, 0, 0)
    # Reading the whole file holds its bytes and every parsed line (several times the file).
    assert peak < size / 2, f"peak {peak:,} bytes for a {size:,}-byte file"
    whole = new_store("whole")
    results_db.import_results(whole, lines)
    assert results_db.build_run_output(conn, "r-big") == results_db.build_run_output(whole, "r-big")
    assert results_db.run_hosts(conn, "r-big") == results_db.run_hosts(whole, "r-big")
    assert results_db.get_run(conn, "r-big") == results_db.get_run(whole, "r-big")
    again = results_db.import_results_file(conn, path, batch=7)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 600)
    conn.close()
    whole.close()


def test_a_file_with_a_config_measured_twice_streams_like_a_whole_import(tmp_path: Path, new_store) -> None:
    lines = sample_results()
    second = copy.deepcopy(lines[0])
    second["finished_at"] = "2026-11-30T11:59:00+00:00"
    second["metrics"]["chat-1k"]["values"]["output_throughput"] = 99.0
    both = [*lines, second]
    path = write_jsonl(tmp_path / "r.jsonl", both)
    streamed = new_store("s")
    summary = results_db.import_results_file(streamed, path, batch=4)
    whole = new_store("w")
    expected = results_db.import_results(whole, both)
    assert (summary.added, summary.updated, summary.unchanged) == (
        expected.added,
        expected.updated,
        expected.unchanged,
    )
    run = lines[0]["run_id"]
    assert results_db.build_run_output(streamed, run) == results_db.build_run_output(whole, run)
    strip = [
        {k: v for k, v in line.items() if k != "superseded_at"}
        for line in results_db.superseded_results(streamed, run)
    ]
    assert strip == [
        {k: v for k, v in line.items() if k != "superseded_at"}
        for line in results_db.superseded_results(whole, run)
    ]


_DAMAGED = {
    "torn last line": lambda good: good + b'{"schema": 1, "run_id": "r',
    "whole last line without newline": lambda good: good.rstrip(b"\n"),
    "blank lines": lambda good: b"\n" + good.replace(b"\n", b"\n\n", 2),
    "not JSON in the middle": lambda good: good.replace(b"\n", b"\n{oops\n", 1),
    "not an object": lambda good: good.replace(b"\n", b"\n[1, 2]\n", 1),
    "not a result": lambda good: good.replace(b"\n", b'\n{"schema": 1, "config_id": "c1"}\n', 1),
}


@pytest.mark.parametrize("skip", [False, True], ids=["strict", "skip-bad-lines"])
@pytest.mark.parametrize("case", list(_DAMAGED))
def test_the_streaming_reader_follows_the_contract_reader(tmp_path: Path, case: str, skip: bool) -> None:
    good = "".join(json.dumps(line) + "\n" for line in sample_results()[:4]).encode()
    path = tmp_path / "r.jsonl"
    path.write_bytes(_DAMAGED[case](good))
    try:
        expected: Any = contract.read_jsonl(str(path), validate=True, run_id="r-x", skip_damaged=skip)
    except contract.ResultsFormatError as err:
        expected = str(err)
    warnings: list[str] = []
    try:
        got: Any = (
            [
                r
                for r, _text in results_db.iter_results_file(
                    path, run_id="r-x", skip_bad_lines=skip, warnings=warnings
                )
            ],
            warnings,
        )
    except contract.ResultsFormatError as err:
        got = str(err)
    assert got == expected


@pytest.mark.parametrize("skip", [False, True], ids=["strict", "skip-bad-lines"])
@pytest.mark.parametrize("case", list(_DAMAGED))
def test_the_parallel_reader_reads_as_the_one_process_reader(
    tmp_path: Path, case: str, skip: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A big file is parsed by worker processes (issue 21 #15): the same records, canonical
    # text, warnings and first error, in file order, whatever chunk a line falls in.
    monkeypatch.setattr(store_files, "_CHUNK_LINES", 2)
    good = "".join(json.dumps(line) + "\n" for line in sample_results()[:4]).encode()
    path = tmp_path / "r.jsonl"
    path.write_bytes(_DAMAGED[case](good))

    def read(workers: int) -> Any:
        warnings: list[str] = []
        try:
            lines = list(results_db.iter_results_file(
                path, run_id="r-x", skip_bad_lines=skip, warnings=warnings, workers=workers
            ))  # fmt: skip
        except contract.ResultsFormatError as err:
            return str(err)
        return lines, warnings

    assert read(2) == read(1)


def test_an_import_by_worker_processes_stores_what_one_process_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, new_store
) -> None:
    lines = _many(60)
    path = write_jsonl(tmp_path / "big.jsonl", lines)
    one = new_store("one")
    results_db.import_results_file(one, path, batch=7)
    monkeypatch.setattr(store_files, "_import_workers", lambda handle: 2)
    monkeypatch.setattr(store_files, "_CHUNK_LINES", 5)
    many = new_store("many")
    summary = results_db.import_results_file(many, path, batch=7)
    assert (summary.added, summary.updated, summary.unchanged) == (60, 0, 0)
    assert results_db.build_run_output(many, "r-big") == results_db.build_run_output(one, "r-big")
    assert results_db.run_hosts(many, "r-big") == results_db.run_hosts(one, "r-big")
    query = "SELECT * FROM results ORDER BY run_id, host, config_id"
    assert [tuple(row) for row in many.execute(query)] == [tuple(row) for row in one.execute(query)]
    again = results_db.import_results_file(many, path)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 60)
    one.close()
    many.close()


def test_bwtune_import_of_a_damaged_file_creates_no_database(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    text = "".join(json.dumps(line) + "\n" for line in sample_results())
    path = tmp_path / "r.jsonl"
    path.write_text(text.replace("\n", "\n{oops\n", 3), encoding="utf-8")
    code = main(["import", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and f"{path}:2: not a JSON line" in err
    assert not list((tmp_path / "home").glob("results.db*"))


# -- runs by query


def _parity(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    output = results_db.build_run_output(conn, run_id)
    summary, best = output["summary"], output["best"]
    return {
        "results": summary["results"], "ok": summary["ok"], "failed": sum(summary["failed"].values()),
        "not_launched": sum(summary["not_launched"].values()), "simulated": summary["simulated"],
        "objective": summary["objective"],
        "best": best and {"id": best["id"], "host": best["host"], "objective": best["objective"]},
    }  # fmt: skip


def test_runs_counts_and_ranks_every_run_by_a_fixed_number_of_queries(tmp_path: Path, new_store) -> None:
    conn = new_store("r")

    def statements() -> int:
        if not isinstance(conn, sqlite3.Connection):
            return 0  # counted on SQLite (its trace callback): the same queries on PostgreSQL
        seen: list[str] = []
        conn.set_trace_callback(seen.append)
        try:
            results_db.list_runs(conn)
        finally:
            conn.set_trace_callback(None)
        return len(seen)

    results_db.import_results(conn, sample_results("r-1"))
    one = statements()
    results_db.import_results(conn, sample_results("r-2", simulated=False, speed_scale=1.3))
    results_db.import_results(conn, _many(40, "r-3"))
    # A re-measured config (its earlier launch superseded) competes with the mean of both.
    remeasured = copy.deepcopy(sample_results("r-1")[1])
    remeasured["finished_at"] = "2026-11-30T12:00:00+00:00"
    for block in remeasured["metrics"].values():
        block["values"]["output_throughput"] = 5000.0
    results_db.import_results(conn, [remeasured])
    results_db.import_results(conn, sample_results("r-min"))
    results_db.record_run(
        conn, "r-min", objective={"metric": "mean_tpot_ms", "goal": "min", "workload": "long-8k"}
    )
    assert statements() == one  # not one query (or more) per run
    runs = results_db.list_runs(conn)
    assert [r["run_id"] for r in runs] == [
        r["run_id"] for r in sorted(runs, key=lambda r: r["created_at"], reverse=True)
    ]
    for run in runs:
        expected = _parity(conn, run["run_id"])
        best, want = run.pop("best"), expected.pop("best")
        assert {k: run[k] for k in expected} == expected, run["run_id"]
        assert (best is None) == (want is None)
        if want is not None:
            assert (best["id"], best["host"]) == (want["id"], want["host"]), run["run_id"]
            assert best["objective"] == pytest.approx(want["objective"], rel=1e-12)
    r1 = next(r for r in runs if r["run_id"] == "r-1")
    assert r1["results"] == len(sample_results("r-1"))


# -- the report of a big run


def test_the_report_of_a_big_run_shows_its_top_configs_and_says_where_the_rest_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, new_store
) -> None:
    conn = new_store("r")
    results_db.import_results(conn, _many(120))
    full = load_report(conn, "r-big", full_max=10_000)
    monkeypatch.setattr(model, "REPORT_TOP", 5)
    monkeypatch.setattr(model, "REPORT_PER_STATUS", 2)
    paged = load_report(conn, "r-big", full_max=50)
    assert full.left_out == 0 and full.left_out_text == ""
    assert paged.best is not None and full.best is not None
    assert (paged.best.id, paged.best.host, paged.best.objective) == (
        full.best.id,
        full.best.host,
        full.best.objective,
    )
    ok_full = [r.id for r in full.rows if r.status == "ok"][:5]
    assert [r.id for r in paged.rows if r.status == "ok"] == ok_full
    others = {status for status in (r.status for r in full.rows) if status != "ok"}
    assert sorted(r.status for r in paged.rows if r.status != "ok") == sorted(
        s for s in others for _ in range(2)
    )
    assert paged.left_out == 120 - len(paged.rows)
    for key in (
        "results",
        "configs",
        "launched",
        "ok",
        "failed",
        "not_launched",
        "hosts",
        "workloads",
        "simulated",
    ):
        assert paged.summary[key] == full.summary[key], key
    html, md = render_html(paged), render_markdown(paged)
    for text in (html, md):
        assert f"{paged.left_out:,} rows are left out" in text
        assert "bwtune export r-big --format csv" in text
    assert "left out" not in render_html(full)
    conn.close()


# -- schema 4


def test_schema_3_results_keep_every_value_through_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for version in range(3):
        for statement in results_db.MIGRATIONS[version]:
            raw.execute(statement)
    raw.execute("PRAGMA user_version = 3")
    line = sample_results()[0]
    key = (line["run_id"], line["host"], line["config_id"])
    raw.execute("INSERT INTO runs (run_id, created_at, objective_json) VALUES (?, 'x', '{}')", key[:1])
    raw.execute("INSERT INTO hosts (run_id, host) VALUES (?, ?)", key[:2])
    raw.execute("INSERT INTO configs VALUES (?, ?, ?, ?)", (key[2], json.dumps(line["flags"]), "[]", "{}"))
    raw.execute(
        "INSERT INTO results (run_id, host, config_id, status, simulated, timings_json, reasons_json, "
        "line_sha256) VALUES (?, ?, ?, 'ok', 1, '{}', '[]', 'old')",
        key,
    )  # imported before schema 2: no whole line, the tables hold the metrics
    for workload, block in line["metrics"].items():
        for metric, value in block["values"].items():
            low, high = block["ci95"][metric]
            raw.execute(
                "INSERT INTO metric_summaries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*key, workload, metric, block["n"], value, low, high, block["cv"][metric]),
            )
        for index, repetition in enumerate(block["repetitions"]):
            for metric, value in repetition.items():
                raw.execute(
                    "INSERT INTO measurements VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*key, workload, metric, index, value),
                )
    raw.close()
    conn = results_db.connect(path)
    assert results_db.schema_version(conn) == results_db.SCHEMA_VERSION
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "workload_values" in tables and not {"metric_summaries", "measurements"} & tables
    [back] = results_db.run_results(conn, line["run_id"])
    assert back["metrics"] == line["metrics"]
    [run] = results_db.list_runs(conn)
    assert run["best"]["id"] == line["config_id"]
    assert run["best"]["objective"] == line["metrics"]["chat-1k"]["values"]["output_throughput"]
    conn.close()
