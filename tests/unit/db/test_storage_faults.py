"""The fault campaign's controller-storage cases (docs/reliability.md, issue 10 #6-#11).

Each test reproduces the hole first: a damaged, full or unwritable database or BWTUNE_HOME
found only after a sweep, a torn last line `bwtune import` refused, reading commands that
created databases, run ids used as paths, `--force` re-measurements replacing rows silently,
and a run that measured nothing looking like a success.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from bwtune import results_db
from bwtune.cli import main
from tests.unit.db.sample_results import sample_results, write_jsonl


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    return tmp_path / "home"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- #8: storage checked before anything is launched


def test_a_usable_home_and_database_pass_and_a_missing_database_is_fine(tmp_path: Path) -> None:
    home = tmp_path / "home"
    results_db.check_writable(home, home / "results.db")
    assert home.is_dir() and not (home / "results.db").exists()
    results_db.connect(home / "results.db").close()
    results_db.check_writable(home, home / "results.db")


def test_a_damaged_database_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    db.write_bytes(b"SQLite format 3\x00" + b"\x07" * 5000)  # a header, then garbage
    with pytest.raises(results_db.StorageError) as info:
        results_db.check_writable(tmp_path, db)
    assert str(db) in str(info.value) and "\n" not in str(info.value)


def test_a_truncated_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    conn = results_db.connect(db)
    results_db.import_results(conn, sample_results())
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    with pytest.raises(results_db.StorageError, match=str(db)):
        results_db.check_writable(tmp_path, db)


def test_a_database_that_cannot_be_written_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    results_db.connect(db).close()
    # Even root cannot write through a WAL file that is a directory.
    (tmp_path / "results.db-wal").unlink(missing_ok=True)
    (tmp_path / "results.db-wal").mkdir()
    with pytest.raises(results_db.StorageError, match=str(db)):
        results_db.check_writable(tmp_path, db)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    results_db.connect(db).close()
    db.chmod(0o444)
    with pytest.raises(results_db.StorageError, match=r"readonly|read-only"):
        results_db.check_writable(tmp_path, db)


def test_a_home_that_cannot_be_created_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(results_db.StorageError, match=r"BWTUNE_HOME .*file/home is not writable"):
        results_db.check_writable(blocker / "home", blocker / "home" / "results.db")


def test_a_full_home_is_refused(tmp_path: Path) -> None:
    with pytest.raises(results_db.StorageError, match=r"MiB free; a run needs at least"):
        results_db.check_writable(tmp_path, tmp_path / "results.db", min_free_bytes=1 << 62)


def test_a_failure_at_the_end_says_where_the_results_are_and_how_to_import(tmp_path: Path) -> None:
    line = results_db.storage_failure_message(
        OSError(28, "No space left on device"),
        "r1",
        {"gpu-b": "/var/lib/bwtune/r1/results.jsonl", "gpu-a": "/srv/r1/results.jsonl"},
        tmp_path / "results.db",
    )
    assert "\n" not in line
    assert "gpu-a:/srv/r1/results.jsonl, gpu-b:/var/lib/bwtune/r1/results.jsonl" in line
    assert "bwtune import FILE --run-id r1" in line and str(tmp_path / "results.db") in line


# -- #9: one torn-last-line rule for the node and `bwtune import`


def test_import_skips_a_torn_last_line_with_a_warning(home: Path, tmp_path: Path, capsys) -> None:
    lines = sample_results()
    path = write_jsonl(tmp_path / "r.jsonl", lines)
    with path.open("a") as handle:  # the node was killed in the middle of its last append
        handle.write(json.dumps(lines[0])[:70])
    code, out, err = _run(capsys, "import", str(path))
    assert code == 0 and f"imported {len(lines)} results" in out
    assert f"r.jsonl:{len(lines) + 1}: skipped a torn last line" in err


def test_import_refuses_a_damaged_line_in_the_middle(home: Path, tmp_path: Path, capsys) -> None:
    lines = sample_results()
    text = "".join(json.dumps(line) + "\n" for line in lines)
    cut = text.index("\n") + 1
    path = tmp_path / "r.jsonl"
    path.write_text(text[:cut] + json.dumps(lines[1])[:70] + "\n" + text[cut:])
    code, _, err = _run(capsys, "import", str(path))
    assert code == 2 and "r.jsonl:2: not a JSON line" in err and err.count("\n") == 1
    assert not (home / "results.db").exists()


# -- #10: reading commands never create


@pytest.mark.parametrize(
    "argv", [["runs"], ["runs", "--json"], ["export", "r1", "--format", "csv"], ["report", "r1"]]
)
def test_reading_commands_never_create_a_database(tmp_path: Path, capsys, argv: list[str]) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    code, out, err = _run(capsys, *argv, "--db", str(missing))
    assert code == 2 and out == ""
    assert (
        err
        == f"bwtune {argv[0]}: no results database at {missing} (bwtune sweep or bwtune import creates it)\n"
    )
    assert not (tmp_path / "nonexistent").exists()


def test_runs_before_any_sweep_says_so_and_creates_nothing(home: Path, capsys) -> None:
    code, out, _ = _run(capsys, "runs")
    assert code == 0 and "no runs yet" in out and not home.exists()


# -- #11: run ids are one path component, everywhere


@pytest.mark.parametrize("run_id", ["../../../../tmp/X", "..", ".hidden", "a/b", "-rf"])
def test_import_refuses_a_run_id_that_is_a_path(home: Path, tmp_path: Path, capsys, run_id: str) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", sample_results())
    code, _, err = _run(capsys, "import", str(path), f"--run-id={run_id}")
    assert (
        code == 2
        and err.startswith(f"bwtune import: --run-id {run_id!r}: not a run id")
        and err.count("\n") == 1
    )
    assert not (home / "results.db").exists()


def test_a_results_line_with_a_path_as_run_id_is_refused(home: Path, tmp_path: Path, capsys) -> None:
    lines = sample_results("../../escape")
    code, _, err = _run(capsys, "import", str(write_jsonl(tmp_path / "r.jsonl", lines)))
    assert code == 2 and "r.jsonl:1: run_id '../../escape'" in err


def test_report_never_writes_outside_runs(home: Path, tmp_path: Path, capsys) -> None:
    # A database written before run ids were checked may hold one: the report refuses it.
    db = home / "results.db"
    results_db.connect(db).close()
    raw = sqlite3.connect(db)
    raw.execute(
        "INSERT INTO runs (run_id, created_at, objective_json) VALUES ('../../../../tmp/X', 'x', '{}')"
    )
    raw.commit()
    raw.close()
    code, _, err = _run(capsys, "report", "../../../../tmp/X")
    assert code == 2 and "not a run id" in err
    assert not (tmp_path / "tmp").exists() and not any(home.rglob("report.html"))
    with pytest.raises(ValueError, match="not a run id"):
        results_db.run_dir("../x")


# -- #7: a re-measured config keeps both measurements


def test_a_remeasured_config_keeps_both_and_says_what_was_replaced(
    home: Path, tmp_path: Path, capsys
) -> None:
    lines = sample_results()
    first = lines[0]
    _run(capsys, "import", str(write_jsonl(tmp_path / "a.jsonl", lines)))
    again = json.loads(json.dumps(first))  # a `--force` sweep measured it again: slower now
    again["finished_at"] = "2026-12-01T10:00:00+00:00"
    for rep in again["metrics"]["chat-1k"]["repetitions"]:
        rep["output_throughput"] = 1.0
    code, out, err = _run(capsys, "import", str(write_jsonl(tmp_path / "b.jsonl", [again])))
    assert code == 0 and "1 re-measured" in out
    assert err == (
        f"bwtune import: re-measured run {first['run_id']}, {first['config_id']} on {first['host']}: "
        "ok -> ok (attempt 2; the earlier measurement is kept)\n"
    )
    _, csv_text, _ = _run(capsys, "export", first["run_id"], "--format", "csv")
    mine = [
        row.split(",") for row in csv_text.splitlines() if f",{first['host']},{first['config_id']}," in row
    ]
    header = csv_text.splitlines()[0].split(",")
    attempt, metric, value = header.index("attempt"), header.index("metric"), header.index("value")
    tput = {
        (row[attempt], float(row[value]))
        for row in mine
        if row[metric] == "output_throughput" and row[header.index("workload")] == "chat-1k"
    }
    old = {("1", rep["output_throughput"]) for rep in first["metrics"]["chat-1k"]["repetitions"]}
    assert tput == old | {("2", 1.0)}


# -- #6: a run that measured nothing does not look like a success


def test_nothing_measured_is_one_line_naming_the_failures(db: sqlite3.Connection) -> None:
    failed = [r for r in sample_results() if r["status"] != "ok"]
    results_db.import_results(db, failed)
    line = results_db.nothing_measured(results_db.build_run_output(db, "r20261130-demo"))
    assert line is not None and "\n" not in line
    assert line.startswith("run r20261130-demo measured nothing: every launch failed (crashed 1,")
    assert "pruned" not in line  # plan decisions are not launch failures
    results_db.import_results(db, sample_results("r2"))
    assert results_db.nothing_measured(results_db.build_run_output(db, "r2")) is None
    plan_only = [r for r in sample_results("r3") if r["status"] in ("pruned", "duplicate")]
    results_db.import_results(db, plan_only)
    assert "no config was launched" in str(results_db.nothing_measured(results_db.build_run_output(db, "r3")))
