"""A regression run against its stored history, and its outputs read by real parsers:
JUnit XML by junitparser, the textfile by prometheus_client's text parser."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from history_lines import stack, store_run
from junitparser import Failure, JUnitXml, Skipped
from prometheus_client.parser import text_string_to_metric_families

from bwtune import regression, regression_history, regression_outputs, results_db

NEW_TORCH = "2.11.0.dev20261129+cu130"


@pytest.fixture
def nightly(db: sqlite3.Connection) -> sqlite3.Connection:
    """Four quiet nights, then a night with a new torch nightly: the production config's
    backend is 7% slower and the alternate crashes."""
    for day in range(1, 5):
        store_run(db, f"night-{day}", day, {"cprod000001": 1000.0, "calt0000002": 800.0}, seed=day)
    store_run(db, "night-5", 5, {"cprod000001": 930.0, "calt0000002": "crashed"}, seed=5,
              stack_components=stack(torch=NEW_TORCH))  # fmt: skip
    return db


def test_a_slower_night_is_a_regression_attributed_to_the_changed_component(
    nightly: sqlite3.Connection,
) -> None:
    report = regression_history.analyze(nightly, "night-5")
    assert report.regressed
    prod = next(c for c in report.configs if c.config_id == "cprod000001")
    objective = next(v for v in prod.workloads[0].verdicts if v.metric == "output_throughput")
    assert objective.verdict == regression.REGRESSION
    assert objective.launches == (8, 8) and objective.change == pytest.approx(-0.07, abs=0.02)
    assert prod.reference_run == "night-4"
    assert [(c["component"], c["after"]) for c in prod.attribution] == [("torch", NEW_TORCH)]
    # TTFT and ITL are compared too: slower decode shows there as well.
    assert {v.metric for v in prod.workloads[0].verdicts} >= set(regression.KEY_LATENCIES)
    alt = next(c for c in report.configs if c.config_id == "calt0000002")
    assert alt.verdict == regression.REGRESSION
    assert {v.failure_class for v in alt.workloads[0].verdicts} == {"crashed"}


def test_a_quiet_night_is_no_regression(db: sqlite3.Connection) -> None:
    for day in range(1, 5):
        store_run(db, f"night-{day}", day, {"cprod000001": 1000.0}, seed=10 + day)
    report = regression_history.analyze(db, "night-4")
    assert not report.regressed
    assert [c.verdict for c in report.configs] == [regression.NO_CHANGE]


def test_a_named_baseline_is_the_reference(nightly: sqlite3.Connection) -> None:
    results_db.set_baseline(nightly, "production", "night-2", set_by="ops", reason="release 5")
    report = regression_history.analyze(nightly, "night-5", baseline="production")
    assert {c.reference_run for c in report.configs} == {"night-2"}
    assert report.baseline is not None and report.baseline["set_by"] == "ops"
    with pytest.raises(LookupError, match="--baseline nope"):
        regression_history.analyze(nightly, "night-5", baseline="nope")


def test_untagged_runs_are_not_history(db: sqlite3.Connection) -> None:
    store_run(db, "sweep-1", 1, {"cprod000001": 2000.0}, tag=False)
    store_run(db, "night-2", 2, {"cprod000001": 1000.0})
    report = regression_history.analyze(db, "night-2")
    assert report.configs[0].reference_run is None
    assert report.configs[0].verdict == regression.INCONCLUSIVE


def test_junit_xml_has_a_case_per_config_and_workload_and_fails_the_regressions(
    nightly: sqlite3.Connection, tmp_path: Path
) -> None:
    report = regression_history.analyze(nightly, "night-5")
    written = regression_outputs.write_all(report, tmp_path / "out", tmp_path / "textfile" / "bwtune.prom")
    xml = JUnitXml.fromfile(str(written["junit"]))
    suites = list(xml)
    cases = [case for suite in suites for case in suite]
    assert sorted((case.classname, case.name) for case in cases) == [
        ("sm120.calt0000002", "chat"),
        ("sm120.cprod000001", "chat"),
    ]
    failed = {case.classname: case.result[0] for case in cases if case.result}
    assert all(isinstance(result, Failure) for result in failed.values())
    assert "crashed" in failed["sm120.calt0000002"].message
    assert "output_throughput regression" in failed["sm120.cprod000001"].message
    assert "torch" in failed["sm120.cprod000001"].text
    assert suites[0].failures == 2 and suites[0].tests == 2


def test_junit_marks_an_undecided_config_skipped(db: sqlite3.Connection, tmp_path: Path) -> None:
    store_run(db, "night-1", 1, {"cprod000001": 1000.0})
    written = regression_outputs.write_all(regression_history.analyze(db, "night-1"), tmp_path)
    case = next(iter(next(iter(JUnitXml.fromfile(str(written["junit"]))))))
    assert isinstance(case.result[0], Skipped) and "no earlier run" in case.result[0].message
    # Undecided, but measured: the textfile still has the config's objective.
    families = {f.name: f for f in text_string_to_metric_families(written["prometheus"].read_text())}
    assert families["bwtune_regression_objective"].samples[0].value == pytest.approx(1000, rel=0.1)


def test_prometheus_textfile_parses_with_objective_verdict_and_last_run(
    nightly: sqlite3.Connection, tmp_path: Path
) -> None:
    report = regression_history.analyze(nightly, "night-5")
    textfile = tmp_path / "bwtune.prom"
    regression_outputs.write_all(report, tmp_path / "out", textfile)
    families = {f.name: f for f in text_string_to_metric_families(textfile.read_text())}
    assert set(families) == {
        "bwtune_regression_objective",
        "bwtune_regression_verdict",
        "bwtune_regression_last_run_timestamp_seconds",
        "bwtune_regression_regressed",
        "bwtune_regression_failed_launches",
        "bwtune_regression_measured",
    }
    verdicts = {
        (s.labels["config"], s.labels["verdict"]): s.value
        for s in families["bwtune_regression_verdict"].samples
    }
    assert verdicts[("cprod000001", "regression")] == 1 and verdicts[("cprod000001", "no change")] == 0
    objective = {s.labels["config"]: s.value for s in families["bwtune_regression_objective"].samples}
    assert set(objective) == {"cprod000001"}  # the crashed config has no objective
    assert objective["cprod000001"] == pytest.approx(930, rel=0.05)
    last = families["bwtune_regression_last_run_timestamp_seconds"].samples[0].value
    assert last == datetime(2026, 11, 5, 2, 0, tzinfo=UTC).timestamp()  # night-5 started then
    assert families["bwtune_regression_regressed"].samples[0].value == 1


def test_markdown_summary_names_the_regression_and_the_component(nightly: sqlite3.Connection) -> None:
    text = regression_outputs.markdown(regression_history.analyze(nightly, "night-5"))
    assert "**REGRESSION**" in text and "SIMULATED" in text
    assert f"-> {NEW_TORCH}" in text


def test_drift_over_nightlies_is_flagged_from_history(db: sqlite3.Connection) -> None:
    levels = [1000.0] * 8 + [1000.0 * (1 - 0.02 * k) for k in range(1, 6)]
    for day, level in enumerate(levels, start=1):
        store_run(db, f"night-{day:02d}", day, {"cprod000001": level}, seed=100 + day)
    report = regression_history.analyze(db, "night-13")
    config = report.configs[0]
    single = next(v for v in config.workloads[0].verdicts if v.metric == "output_throughput")
    assert single.verdict != regression.REGRESSION  # one night's step is under 3%
    assert config.drift is not None and config.verdict == regression.REGRESSION
    assert report.regressed
