"""`bwtune baseline` and `bwtune regress` through the real CLI: baselines with who, when and
why; bad input refused in one line with exit 2 before anything runs; the report's section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from history_lines import store_run

from bwtune import regression_history, regression_outputs, report, results_db
from bwtune.cli import main

INVENTORY = Path(__file__).parents[3] / "inventory" / "local.yml"
MATRIX = Path(__file__).parents[3] / "examples" / "demo.yml"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    conn = results_db.connect(tmp_path / "home" / "results.db")
    for day in (1, 2, 3):
        store_run(conn, f"night-{day}", day, {"cprod000001": 1000.0}, launches=3, seed=day)
    conn.close()
    return tmp_path / "home"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_baseline_set_show_list(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, _err = _run(capsys, "baseline", "set", "production", "night-2", "--reason", "release 5",
                            "--by", "alice")  # fmt: skip
    assert code == 0
    code, out, _err = _run(capsys, "baseline", "show", "production", "--json")
    shown = json.loads(out)["baselines"][0]
    assert (shown["name"], shown["run_id"], shown["set_by"], shown["reason"]) == (
        "production", "night-2", "alice", "release 5")  # fmt: skip
    assert shown["set_at"].startswith("20")
    # Set again: the name moves to the new run.
    _run(capsys, "baseline", "set", "production", "night-3", "--reason", "release 6")
    code, out, _err = _run(capsys, "baseline", "list", "--json")
    assert [(b["name"], b["run_id"]) for b in json.loads(out)["baselines"]] == [("production", "night-3")]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["baseline", "set", "x", "no-such-run", "--reason", "r"], "no-such-run"),
        (["baseline", "show", "nope"], "nope"),
        (["regress", "-i", str(INVENTORY), "-m", "/nonexistent/matrix.yml"], "/nonexistent/matrix.yml"),
        (["regress", "-i", str(INVENTORY), "-m", str(MATRIX), "--min-effect", "3"], "--min-effect 3"),
        (["regress", "-i", str(INVENTORY), "-m", str(MATRIX), "--repetitions", "0"], "--repetitions 0"),
        (["regress", "-i", str(INVENTORY), "-m", str(MATRIX), "--baseline", "ghost"], "--baseline ghost"),
        (["regress", "-i", "/nonexistent/inv.yml", "-m", str(MATRIX)], "/nonexistent/inv.yml"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    before = sorted(p.name for p in (home / "runs").glob("*")) if (home / "runs").exists() else []
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and named in err
    after = sorted(p.name for p in (home / "runs").glob("*")) if (home / "runs").exists() else []
    assert after == before  # nothing started, no run folder made


def test_the_html_report_has_the_history_section(home: Path, tmp_path: Path) -> None:
    conn = results_db.connect(home / "results.db")
    try:
        results_db.set_baseline(conn, "production", "night-1", set_by="ops", reason="r")
        analysis = regression_history.analyze(conn, "night-3", baseline="production")
        html_path = tmp_path / "report.html"
        report.write_report(conn, "night-3", html_path=html_path, regression=analysis.to_dict())
    finally:
        conn.close()
    html = html_path.read_text()
    assert 'id="regression"' in html and "regression-history" in html
    assert html.count('class="level') == 3  # one dot per run of the history
    assert 'class="level baseline"' in html  # night-1, the baseline, ringed


def test_bwtune_report_of_a_regression_run_keeps_the_section(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = results_db.connect(home / "results.db")
    try:
        analysis = regression_history.analyze(conn, "night-3")
    finally:
        conn.close()
    assert _run(capsys, "report", "night-2")[0] == 0
    assert 'id="regression"' not in (home / "runs" / "night-2" / "report.html").read_text()
    regression_outputs.write_all(analysis, results_db.run_dir("night-3"))  # what bwtune regress leaves
    assert _run(capsys, "report", "night-3")[0] == 0
    assert 'id="regression"' in (home / "runs" / "night-3" / "report.html").read_text()
