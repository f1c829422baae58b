"""The results commands through the real CLI entry point: import, runs, export, report."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from bwtune import results_db
from bwtune.cli import main
from tests.unit.db.conftest import stored_runs
from tests.unit.db.sample_results import sample_results, write_jsonl


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_import_twice_then_merge_a_second_host(home: Path, tmp_path: Path, capsys) -> None:
    lines = sample_results()
    host_a = write_jsonl(tmp_path / "a.jsonl", [r for r in lines if r["host"] == "gpu-a"])
    host_b = write_jsonl(tmp_path / "b.jsonl", [r for r in lines if r["host"] == "gpu-b"])
    code, out, _ = _run(capsys, "import", str(host_a))
    assert code == 0 and "13 added, 0 re-measured, 0 unchanged" in out
    code, out, _ = _run(capsys, "import", str(host_a))
    assert code == 0 and "0 added, 0 re-measured, 13 unchanged" in out
    code, out, _ = _run(capsys, "import", str(host_b))
    assert code == 0 and "2 added" in out
    assert "BWTUNE_DB" in os.environ or (home / "results.db").exists()
    code, out, _ = _run(capsys, "runs", "--json")
    output = json.loads(out)
    assert output["schema"] == 1
    assert [(r["run_id"], r["hosts"], r["results"]) for r in output["runs"]] == [("r20261130-demo", 2, 15)]


def test_import_with_run_id_and_matrix_objective(home: Path, tmp_path: Path, capsys) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", sample_results())
    matrix = tmp_path / "m.yml"
    matrix.write_text("objective:\n  workload: long-8k\n  metric: mean_tpot_ms\n  goal: min\n")
    code, out, _ = _run(capsys, "import", str(path), "--run-id", "nightly-1", "--matrix", str(matrix))
    assert code == 0 and "run nightly-1" in out
    code, out, _ = _run(capsys, "export", "nightly-1", "--format", "json")
    output = json.loads(out)
    assert output["summary"]["objective"] == {"workload": "long-8k", "metric": "mean_tpot_ms", "goal": "min"}
    ok = [r for r in output["results"] if r["status"] == "ok"]
    assert output["best"]["objective"] == min(r["objective"] for r in ok)


def test_import_without_a_matrix_ranks_by_the_objective_the_lines_were_measured_for(
    home: Path, tmp_path: Path, capsys
) -> None:
    # It used to rank by the default objective (output_throughput, max) instead (issue 20 #28).
    measured_for = {"workload": "long-8k", "metric": "mean_tpot_ms", "goal": "min"}
    lines = [{**line, "objective": measured_for} for line in sample_results()]
    path = write_jsonl(tmp_path / "r.jsonl", lines)
    code, out, err = _run(capsys, "import", str(path), "--run-id", "nightly-2")
    assert code == 0, err
    code, out, _ = _run(capsys, "export", "nightly-2", "--format", "json")
    output = json.loads(out)
    assert output["summary"]["objective"] == measured_for
    ok = [r for r in output["results"] if r["status"] == "ok"]
    assert output["best"]["objective"] == min(r["objective"] for r in ok)


def test_a_line_with_a_bad_objective_is_refused_naming_it(home: Path, tmp_path: Path, capsys) -> None:
    lines = sample_results()[:2]
    lines[1]["objective"] = {"metric": "ttft", "goal": "lowest"}
    code, _out, err = _run(capsys, "import", str(write_jsonl(tmp_path / "o.jsonl", lines)))
    assert code == 2 and ":2: objective: objective goal 'lowest' must be 'max' or 'min'" in err, err


def test_bad_results_file_is_one_line_and_exit_2(home: Path, tmp_path: Path, capsys) -> None:
    bad = sample_results()[:2]
    bad[1]["status"] = "exploded"
    path = write_jsonl(tmp_path / "bad.jsonl", bad)
    code, out, err = _run(capsys, "import", str(path))
    assert code == 2 and out == ""
    assert (
        err == f"bwtune import: {path}:2: status 'exploded' is not one of {', '.join(results_db.STATUSES)}\n"
    )
    # Nothing half-imported.
    assert stored_runs() == []
    code, _, err = _run(capsys, "import", str(tmp_path / "missing.jsonl"))
    assert code == 2 and err.count("\n") == 1 and "missing.jsonl" in err


def test_unknown_run_is_one_line_and_exit_2(home: Path, tmp_path: Path, capsys) -> None:
    _run(capsys, "import", str(write_jsonl(tmp_path / "r.jsonl", sample_results())))
    for argv in (["export", "nope", "--format", "csv"], ["report", "nope"]):
        code, out, err = _run(capsys, *argv)
        assert code == 2 and out == ""
        assert err.endswith("no run 'nope' in the results database\n") and err.count("\n") == 1


def test_not_a_database_is_one_line(tmp_path: Path, capsys) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    code, _, err = _run(capsys, "runs", "--db", str(junk))
    assert code == 2 and str(junk) in err and err.count("\n") == 1


def test_export_csv_has_every_repetition(home: Path, tmp_path: Path, capsys) -> None:
    lines = sample_results()
    _run(capsys, "import", str(write_jsonl(tmp_path / "r.jsonl", lines)))
    target = tmp_path / "out.csv"
    code, out, _ = _run(capsys, "export", "r20261130-demo", "--format", "csv", "-o", str(target))
    assert code == 0 and out == ""
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    expected = sum(
        len(rep) for line in lines for block in line["metrics"].values() for rep in block["repetitions"]
    ) + sum(1 for line in lines if not line["metrics"])
    assert len(rows) == expected
    first = lines[0]
    rep1 = [r for r in rows if r["config_id"] == first["config_id"] and r["host"] == "gpu-a"
            and r["workload"] == "chat-1k" and r["metric"] == "output_throughput"]  # fmt: skip
    assert [float(r["value"]) for r in rep1] == [
        rep["output_throughput"] for rep in first["metrics"]["chat-1k"]["repetitions"]
    ]
    assert {r["simulated"] for r in rows} == {"1"}


def test_runs_table_labels_simulated(home: Path, tmp_path: Path, capsys) -> None:
    code, out, _ = _run(capsys, "runs")
    assert code == 0 and "no runs yet" in out
    _run(capsys, "import", str(write_jsonl(tmp_path / "r.jsonl", sample_results())))
    code, out, _ = _run(capsys, "runs")
    header, rule, row = out.splitlines()  # bwtune.console's table: a rule under the header
    assert set(rule) <= {"─", " "}
    assert header.split()[:3] == ["RUN", "STARTED", "HOSTS"]
    assert row.startswith("r20261130-demo") and row.endswith("SIMULATED (bwtune stand-in)")


def test_report_command_writes_both_files(home: Path, tmp_path: Path, capsys) -> None:
    _run(capsys, "import", str(write_jsonl(tmp_path / "r.jsonl", sample_results())))
    code, out, _ = _run(capsys, "report", "r20261130-demo")
    html = home / "runs" / "r20261130-demo" / "report.html"
    md = home / "runs" / "r20261130-demo" / "report.md"
    assert code == 0 and str(html) in out and str(md) in out and "SIMULATED" in out
    assert html.read_text().startswith("<!DOCTYPE html>") and md.read_text().startswith("# bwtune report")
    only = tmp_path / "x" / "only.html"
    code, out, _ = _run(capsys, "report", "r20261130-demo", "--html", str(only))
    assert code == 0 and only.exists() and not (tmp_path / "x" / "report.md").exists()
