"""Reading commands open the results database read-only and never migrate it (issue 21 #16).

The database lies on a read-only mount: a read-only bind mount where this test may mount
(root in the dev VM), else a folder the test cannot write (mode 0555, not root), else (root
without mount rights) a folder os.access reports read-only, whose files are checked for
not having changed at all.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bwtune import results_db
from bwtune.cli import main
from tests.unit.db.sample_results import sample_results


def _fingerprint(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.fixture
def read_only_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """(writable source folder, the same folder read-only): fill the first, read the second."""
    source, view = tmp_path / "source", tmp_path / "ro"
    source.mkdir()
    view.mkdir()
    yield_view = _mount_read_only(source, view)
    if yield_view is None and os.geteuid() != 0:
        yield_view = source  # permission bits stop a user that is not root
        state = {"chmod": True}
    else:
        state = {"chmod": False}
    if yield_view is None:  # root without mount rights: say the folder is read-only
        real_access = os.access

        def access(path: object, mode: int, **kw: object) -> bool:
            if mode & os.W_OK and Path(str(path)).resolve() == source.resolve():
                return False
            return real_access(path, mode, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "access", access)
        yield_view = source
    try:
        yield source, yield_view
    finally:
        if yield_view == view:
            subprocess.run(["umount", str(view)], check=False, capture_output=True)
        if state["chmod"]:
            source.chmod(0o755)


def _mount_read_only(source: Path, view: Path) -> Path | None:
    if os.geteuid() != 0:
        return None
    bind = subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True, check=False)
    if bind.returncode != 0:
        return None
    ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], capture_output=True, check=False)
    if ro.returncode != 0:
        subprocess.run(["umount", str(view)], check=False, capture_output=True)
        return None
    return view


def _seal(source: Path, view: Path) -> None:
    if view == source and os.geteuid() != 0:
        source.chmod(0o555)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _filled(folder: Path) -> tuple[str, Path]:
    path = folder / "results.db"
    conn = results_db.connect(path)
    lines = sample_results()
    results_db.import_results(conn, lines)
    results_db.set_baseline(conn, "prod", lines[0]["run_id"], set_by="t", reason="r")
    conn.close()
    return lines[0]["run_id"], path


def test_reading_commands_read_a_database_on_a_read_only_mount(
    read_only_folder: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    source, view = read_only_folder
    run_id, _ = _filled(source)
    assert not (source / "results.db-wal").exists()  # closed cleanly: all in the file
    _seal(source, view)
    before = _fingerprint(source)
    db = str(view / "results.db")
    code, out, err = _run(capsys, "runs", "--json", "--db", db)
    assert code == 0, err
    [run] = json.loads(out)["runs"]
    assert run["run_id"] == run_id and run["best"] is not None
    code, out, err = _run(capsys, "export", run_id, "--format", "json", "--db", db)
    assert code == 0 and json.loads(out)["run_id"] == run_id, err
    code, out, err = _run(capsys, "report", run_id, "--md", str(tmp_path / "r.md"), "--db", db)
    assert code == 0 and (tmp_path / "r.md").is_file(), err
    for action in ("show", "list"):
        args = ["baseline", action, *(["prod"] if action == "show" else []), "--json", "--db", db]
        code, out, err = _run(capsys, *args)
        assert code == 0 and json.loads(out)["baselines"][0]["run_id"] == run_id, err
    assert _fingerprint(source) == before  # no byte, no mtime, no -wal or -shm


def test_an_older_schema_is_read_without_being_upgraded_and_says_what_upgrades_it(
    tmp_path: Path, capsys
) -> None:
    path = tmp_path / "old.db"
    line = sample_results()[0]
    raw = sqlite3.connect(path)
    for statement in results_db.MIGRATIONS[0]:
        raw.execute(statement)
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
    before = _fingerprint(tmp_path)
    code, out, err = _run(capsys, "runs", "--json", "--db", str(path))
    assert code == 0
    assert [r["run_id"] for r in json.loads(out)["runs"]] == [line["run_id"]]
    assert err == (
        f"bwtune runs: note: results database {path} has schema version 1, older than this bwtune's "
        f"{results_db.SCHEMA_VERSION}: read through an upgraded copy in memory, the file is unchanged; "
        "a writing command (bwtune import, bwtune sweep) upgrades it in place\n"
    )
    code, out, err = _run(capsys, "export", line["run_id"], "--db", str(path))
    assert code == 0 and "schema version 1" in err
    assert _fingerprint(tmp_path) == before
    check = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert check.execute("PRAGMA user_version").fetchone()[0] == 1
    check.close()


def test_a_read_only_connection_refuses_writes(tmp_path: Path) -> None:
    _filled(tmp_path)
    conn = results_db.connect_readonly(tmp_path / "results.db")
    try:
        with pytest.raises(sqlite3.DatabaseError):
            conn.execute("DELETE FROM runs")
    finally:
        conn.close()
