"""`bwtune import` of a results file with a line that is not a result (issue 21 #6), and a
re-measured config's launches arriving out of order (issue 21 #5): refused naming the line,
or with --skip-bad-lines each bad line skipped by name and the rest stored; attempts keep
the order the launches were made in."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from bwtune import results_db
from bwtune.cli import main
from tests.unit.db.conftest import stored_runs
from tests.unit.db.sample_results import sample_results


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _with_bad_middle_lines(tmp_path: Path) -> tuple[Path, list[dict], str]:
    lines = sample_results()
    not_a_result = copy.deepcopy(lines[1])
    del not_a_result["metrics"]
    text = json.dumps(lines[0]) + "\n" + json.dumps(not_a_result) + "\n" + '{"cut": \n'
    text += "".join(json.dumps(line) + "\n" for line in lines[2:])
    path = tmp_path / "r.jsonl"
    path.write_text(text)
    return path, [lines[0], *lines[2:]], not_a_result["config_id"]


def test_a_line_that_is_not_a_result_is_refused_naming_it(home: Path, tmp_path: Path, capsys) -> None:
    path, _good, _config = _with_bad_middle_lines(tmp_path)
    code, _out, err = _run(capsys, "import", str(path))
    assert code == 2 and "r.jsonl:2: missing key 'metrics'" in err
    assert stored_runs() == []  # and, on SQLite, no file made for it
    assert "BWTUNE_DB" in os.environ or not (home / "results.db").exists()


def test_skip_bad_lines_imports_the_rest_and_names_each_skipped_line(
    home: Path, tmp_path: Path, capsys
) -> None:
    path, good, config = _with_bad_middle_lines(tmp_path)
    code, out, err = _run(capsys, "import", str(path), "--skip-bad-lines")
    assert code == 1, "a skipped line is a result not stored: never a plain success"
    assert f"r.jsonl:2: skipped a line that is not a result (missing key 'metrics'; config {config})" in err
    assert "r.jsonl:3: skipped a line that is not JSON" in err
    assert f"imported {len(good)} results" in out and "2 bad lines skipped" in out
    conn = results_db.connect(results_db.default_db_path())
    try:
        stored = {(r["host"], r["config_id"]) for r in results_db.run_results(conn, good[0]["run_id"])}
    finally:
        conn.close()
    assert stored == {(line["host"], line["config_id"]) for line in good}


def test_a_re_measure_imported_before_its_first_launch_keeps_the_launch_order(home: Path) -> None:
    first = next(line for line in sample_results() if line["status"] == "ok")
    second = copy.deepcopy(first)
    second["finished_at"] = "2999-01-01T00:00:00+00:00"
    workload = next(iter(second["metrics"]))
    second["metrics"][workload]["values"]["output_throughput"] = 1.0
    conn = results_db.connect(results_db.default_db_path())
    try:
        results_db.import_results(conn, [second])  # the later launch reached the database first
        summary = results_db.import_results(conn, [first, second])  # then the node's whole file
        current = conn.execute(
            "SELECT attempt, finished_at FROM results WHERE run_id = ? AND host = ? AND config_id = ?",
            (first["run_id"], first["host"], first["config_id"]),
        ).fetchone()
        earlier = results_db.superseded_results(conn, first["run_id"])
    finally:
        conn.close()
    assert (current["attempt"], current["finished_at"]) == (2, second["finished_at"])
    assert [(line["attempt"], line["finished_at"]) for line in earlier] == [(1, first["finished_at"])]
    assert summary.added == 1 and summary.updated == 0
