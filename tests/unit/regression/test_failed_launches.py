"""Failed launches in a regression run (issues 20 and 21): a crashed repetition among ok ones
is told everywhere and never compared as a value; a run that measured nothing is never
"no regression" (exit 3, JUnit errors) and is no baseline without --force."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from history_lines import store_run
from junitparser import Error, Failure, JUnitXml, Skipped

from bwtune import exit_codes, regression, regression_history, regression_outputs, report, results_db
from bwtune.cli import main
from bwtune.commands import regress
from bwtune.report.regression_chart import regression_section

INVENTORY = Path(__file__).parents[3] / "inventory" / "local.yml"
MATRIX = Path(__file__).parents[3] / "examples" / "demo.yml"
CRASH_AT_3 = {("cprod000001", 3): "crashed"}


def _objective(report: regression_history.RegressionReport) -> regression.Verdict:
    (config,) = report.configs
    return next(v for v in config.workloads[0].verdicts if v.metric == "output_throughput")


def test_a_crashed_launch_among_ok_ones_is_told_and_the_ok_ones_are_measured(db: sqlite3.Connection) -> None:
    store_run(db, "night-1", 1, {"cprod000001": 1000.0}, seed=1, failed=CRASH_AT_3)
    report = regression_history.analyze(db, "night-1")
    (config,) = report.configs
    assert config.launches == 8 and [f["status"] for f in config.failed_launches] == ["crashed"]
    assert config.failed_launches[0]["attempt"] == 3
    assert config.failed_text == "crashed 1 of 8 launches"
    # The 7 ok launches are the run's level: the history shows a measured run.
    (point,) = config.history
    assert point.level == pytest.approx(1000.0, rel=0.05)
    assert (point.launches, point.failed_launches) == (8, 1)
    assert "crashed 1 of 8 launches" in _objective(report).note
    assert report.measured and report.outcome == "no regression"
    text = regression_outputs.markdown(report)
    assert "7 ok; crashed 1 of 8 launches" in text and "failed launch: attempt 3" in text
    as_json = report.to_dict()
    assert as_json["configs"][0]["failed"] == "crashed 1 of 8 launches"
    assert as_json["configs"][0]["failed_launches"][0]["attempt"] == 3
    html = regression_section(as_json)
    assert "No measured run yet" not in html and 'class="level' in html
    assert "crashed 1 of 8 launches" in html


def test_the_next_run_compares_the_ok_launches_not_was_crashed_now_ok(db: sqlite3.Connection) -> None:
    store_run(db, "night-1", 1, {"cprod000001": 1000.0}, seed=1, failed=CRASH_AT_3)
    store_run(db, "night-2", 2, {"cprod000001": 1000.0}, seed=2)
    report = regression_history.analyze(db, "night-2")
    verdict = _objective(report)
    assert report.configs[0].reference_run == "night-1"
    assert verdict.verdict == regression.NO_CHANGE, verdict
    assert verdict.launches == (7, 8) and verdict.change is not None
    assert "was crashed" not in verdict.note and "the reference: crashed 1 of 8 launches" in verdict.note


def test_a_crashed_launch_against_a_clean_reference_is_a_regression(db: sqlite3.Connection) -> None:
    store_run(db, "night-1", 1, {"cprod000001": 1000.0}, seed=1)
    store_run(db, "night-2", 2, {"cprod000001": 1000.0}, seed=2, failed=CRASH_AT_3)
    report = regression_history.analyze(db, "night-2")
    verdict = _objective(report)
    assert verdict.verdict == regression.REGRESSION and verdict.failure_class == "crashed"
    assert verdict.launches == (8, 7) and verdict.change is not None  # the ok launches' values stay
    assert report.regressed


def test_a_run_that_measured_nothing_is_no_verdict_and_junit_errors(db: sqlite3.Connection) -> None:
    store_run(db, "night-1", 1, {"cprod000001": "crashed"}, launches=2)
    report = regression_history.analyze(db, "night-1")
    assert not report.regressed and not report.measured and report.outcome == "nothing measured"
    text = regression_outputs.markdown(report)
    assert "**NOTHING MEASURED**" in text and "no regression" not in text
    suite = next(iter(JUnitXml.fromstring(regression_outputs.junit_xml(report).encode())))
    assert (suite.failures, suite.errors, suite.skipped) == (0, 1, 0)
    (case,) = list(suite)
    assert [type(r) for r in case.result] == [Error] and "nothing measured" in case.result[0].message
    assert "bwtune_regression_measured 0" in regression_outputs.prometheus_text(report)


def test_all_failed_after_a_measured_history_is_a_regression(db: sqlite3.Connection) -> None:
    store_run(db, "night-1", 1, {"cprod000001": 1000.0}, seed=1, failed=CRASH_AT_3)
    store_run(db, "night-2", 2, {"cprod000001": "crashed"}, launches=2)
    report = regression_history.analyze(db, "night-2")
    assert report.regressed and report.outcome == "regression"
    suite = next(iter(JUnitXml.fromstring(regression_outputs.junit_xml(report).encode())))
    (case,) = list(suite)
    assert [type(r) for r in case.result] == [Failure] and Skipped not in [type(r) for r in case.result]


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    results_db.connect(tmp_path / "home" / "results.db").close()
    return tmp_path / "home"


def _regress(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], home: Path, levels: dict[str, Any],
    **store: Any,
) -> tuple[int, str, str]:  # fmt: skip
    """`bwtune regress` with its launches replaced by stored lines of `levels`."""

    def measured(request: Any, repetitions: int, *, quiet: bool = False, estimate: Any = None) -> None:
        conn = results_db.connect(home / "results.db")
        try:
            store_run(conn, request.run_id, 9, levels, launches=repetitions, tag=False, **store)
        finally:
            conn.close()

    monkeypatch.setattr(regress, "measure", measured)
    code = main(["regress", "-i", str(INVENTORY), "-m", str(MATRIX), "--repetitions", "2", "--quiet"])
    out, err = capsys.readouterr()
    return code, out, err


def test_regress_of_a_run_where_every_launch_failed_exits_3(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _regress(monkeypatch, capsys, home, {"cprod000001": "crashed"})
    assert code == exit_codes.NOTHING_MEASURED == 3
    assert "NOTHING MEASURED" in out and "no regression" not in out
    assert err.count("\n") == 1 and "measured nothing" in err


def test_regress_json_tells_a_crashed_repetition(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def measured(request: Any, repetitions: int, *, quiet: bool = False, estimate: Any = None) -> None:
        conn = results_db.connect(home / "results.db")
        try:
            store_run(conn, request.run_id, 9, {"cprod000001": 1000.0}, launches=4, tag=False,
                      failed={("cprod000001", 2): "crashed"})  # fmt: skip
        finally:
            conn.close()

    monkeypatch.setattr(regress, "measure", measured)
    code = main(["regress", "-i", str(INVENTORY), "-m", str(MATRIX), "--json", "--quiet"])
    out = capsys.readouterr().out
    assert code == exit_codes.OK  # no history: inconclusive, and the crash is told
    (config,) = json.loads(out)["configs"]
    assert config["failed"] == "crashed 1 of 4 launches" and config["launches"] == 4
    assert json.loads(out)["statistic"] == regression_history.STATISTIC


def test_baseline_set_refuses_a_run_that_measured_nothing_unless_forced(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = results_db.connect(home / "results.db")
    store_run(conn, "night-1", 1, {"cprod000001": "crashed"}, launches=2)
    store_run(conn, "night-2", 2, {"cprod000001": 1000.0}, seed=2, failed=CRASH_AT_3)
    conn.close()
    code = main(["baseline", "set", "production", "night-1", "--reason", "r"])
    out, err = capsys.readouterr()
    assert code == exit_codes.BAD_INPUT and out == ""
    assert err.count("\n") == 1 and "night-1 measured nothing (crashed 2)" in err and "--force" in err
    assert main(["baseline", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["baselines"] == []
    # A run that measured beside a crashed launch is a baseline; --force names the other anyway.
    assert main(["baseline", "set", "production", "night-2", "--reason", "r"]) == 0
    capsys.readouterr()
    assert main(["baseline", "set", "empty", "night-1", "--reason", "r", "--force"]) == 0
    assert "--force" in capsys.readouterr().err


def test_regress_says_repetition_k_of_n_with_an_eta_from_the_time_so_far(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ticks = iter(range(0, 1000, 60))  # every repetition takes 60 s
    monkeypatch.setattr(regress, "_clock", lambda: float(next(ticks)))

    class Outcome:
        exit_code, messages = exit_codes.OK, []
        output = {"summary": {"failed": {"crashed": 1}}}  # each repetition crashes one launch

    monkeypatch.setattr(regress.sweep_service, "run_sweep", lambda request: Outcome())
    request = regress.sweep_service.SweepRequest(inventory=None, matrix={}, matrix_source="m", run_id="r")  # type: ignore[arg-type]
    assert regress.measure(request, 3) is None
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(";")[0] for line in lines] == [
        "bwtune regress: repetition 1/3", "bwtune regress: repetition 2/3", "bwtune regress: repetition 3/3"
    ]  # fmt: skip
    assert "ETA 2m00s (2 left at 1m00s each" in lines[1] and "ETA 1m00s (1 left" in lines[2]
    assert "failed launches so far" not in lines[0]
    assert "failed launches so far: crashed 1 " in lines[1] and "so far: crashed 2 " in lines[2]
    # Before the first: the plan's launches at what `bwtune plan` says one costs.
    first = regress.progress_line(1, 8, [], regress._estimate(yaml.safe_load(MATRIX.read_text())))
    assert first.startswith("repetition 1/8; ETA about ") and "launches at" in first


def test_the_run_report_tells_a_crashed_repetition(home: Path, tmp_path: Path) -> None:
    conn = results_db.connect(home / "results.db")
    try:
        store_run(conn, "night-1", 1, {"cprod000001": 1000.0}, seed=1, failed=CRASH_AT_3)
        md_path, html_path = tmp_path / "report.md", tmp_path / "report.html"
        analysis = regression_history.analyze(conn, "night-1")
        report.write_report(
            conn, "night-1", html_path=html_path, md_path=md_path, regression=analysis.to_dict()
        )
    finally:
        conn.close()
    md, html = md_path.read_text(), html_path.read_text()
    assert "No launch failed" not in md and "No launch failed" not in html
    assert "earlier launches that failed (re-measured configs; not in any value): crashed 1" in md
    assert "mean of 7 launches; crashed 1 more (not in the value)" in md
    assert "attempt 3: crashed" in md and "attempt 3: crashed" in html
    assert "crashed 1 of 8 launches" in html  # the regression section too


def test_stdout_and_the_report_name_the_same_statistic(db: sqlite3.Connection) -> None:
    store_run(db, "night-1", 1, {"cprod000001": 1000.0}, seed=1)
    store_run(db, "night-2", 2, {"cprod000001": 1000.0}, seed=2)
    report_ = regression_history.analyze(db, "night-2")
    verdict = _objective(report_)
    text = regression_outputs.markdown(report_)
    html = regression_section(report_.to_dict())
    assert regression_history.STATISTIC in text and regression_history.STATISTIC in html
    assert "output_throughput (median)" in text and "this run (median)" in html
    value = f"{verdict.candidate_median:.4g}"
    assert f"| {value} |" in text  # stdout's value is the median ...
    assert f"<td>{value}</td>" in html  # ... and so is the report's
