"""What `bwtune regress` writes: a Markdown summary, JUnit XML and a Prometheus textfile.

- JUnit XML: one test suite per run, one test case per config and workload
  (`classname` the config id and GPU, `name` the workload); a regression is a `<failure>`
  naming the metrics, the change and the stack components that changed; a run that could
  not decide is `<skipped>`. CI systems (Jenkins, GitLab, GitHub) read it as test results.
- Prometheus textfile (node_exporter's textfile collector): per config its objective
  (median of the run), its verdict (one series per verdict, 1 for the one that holds) and
  the time of its last run; written atomically, as the collector expects.
"""

from __future__ import annotations

import json
import os
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from bwtune import regression
from bwtune.regression_history import (
    STATISTIC,
    ConfigReport,
    RegressionReport,
    WorkloadVerdicts,
    verdict_counts,
    worst_first,
)

SIMULATED_NOTE = "SIMULATED: bwtune stand-in, not a GPU"


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value * 100:+.1f}%"


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _objective_verdict(report: RegressionReport, config: ConfigReport) -> regression.Verdict | None:
    for workload in config.workloads:
        if workload.workload == report.objective.get("workload") or len(config.workloads) == 1:
            for verdict in workload.verdicts:
                if verdict.metric == report.objective["metric"]:
                    return verdict
    return None


def markdown(report: RegressionReport) -> str:
    counts = verdict_counts(report)
    o = report.objective
    lines = [
        f"# bwtune regression run {report.run_id}",
        "",
        *([f"**{SIMULATED_NOTE}**", ""] if report.simulated else []),
        f"- outcome: **{outcome_text(report)}** ({', '.join(f'{name} {n}' for name, n in counts.items())})",
        f"- objective: {o['goal']} {o['metric']} on {o.get('workload')}; every value here (and in "
        f"the report's regression section) is the {STATISTIC} (the report's Configs table ranks "
        "by the mean over launches, and says so)",
        f"- minimum effect: {report.settings.min_effect * 100:g}%; test: Mann-Whitney U, alpha "
        f"{report.settings.alpha:g}; change points: E-divisive means",
        f"- reference: baseline {report.baseline['name']} (run {report.baseline['run_id']})"
        if report.baseline
        else "- reference: each config's previous regression run",
        "",
        f"| config | GPU | verdict | launches | {o['metric']} (median) | change | p | reference "
        "| stack change |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for config in worst_first(report.configs):
        main = _objective_verdict(report, config)
        stack = regression.attribution_text(config.attribution) if config.attribution else ""
        lines.append(
            f"| `{config.config_id}` | {config.gpu} | {config.verdict}"
            f"{' (drift)' if config.drift else ''} | {launches_text(config)} | "
            f"{_num(main.candidate_median if main else None)} | "
            f"{_pct(main.change if main else None)} | "
            f"{'' if main is None or main.p_value is None else f'{main.p_value:.3g}'} | "
            f"{config.reference_run or ''} | {stack} |"
        )
    details = [
        c
        for c in worst_first(report.configs)
        if c.verdict != regression.NO_CHANGE or c.change_points or c.failed_launches
    ]
    if details:
        lines += ["", "## Details", ""]
    for config in details:
        lines.append(f"### `{config.config_id}` ({config.gpu}): {config.verdict}")
        lines.append("")
        lines.append(f"{config.label}")
        lines.append("")
        for workload in config.workloads:
            for verdict in workload.verdicts:
                if verdict.verdict != regression.NO_CHANGE:
                    lines.append(f"- {workload.workload} {verdict.metric}: {verdict.text()}"
                                 f"{' — ' + verdict.note if verdict.note else ''}")  # fmt: skip
        for cp in config.change_points:
            lines.append(
                f"- change point at run {cp.run_id} (after {cp.last_good_run}): level "
                f"{cp.before:.4g} -> {cp.after:.4g} ({_pct(cp.change)}, {cp.verdict}); "
                f"{regression.attribution_text(cp.components)}"
            )
        if config.attribution:
            lines.append(f"- stack components changed: {regression.attribution_text(config.attribution)}")
        for failed in config.failed_launches:
            lines.append(f"- failed launch: {_failed_launch_text(failed)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def outcome_text(report: RegressionReport) -> str:
    """REGRESSION, NOTHING MEASURED (every launch failed, nothing to compare: never "no
    regression") or no regression."""
    return report.outcome if report.outcome == "no regression" else report.outcome.upper()


def launches_text(config: ConfigReport) -> str:
    """ "8" or "7 ok; crashed 1 of 8 launches"."""
    if not config.failed_launches:
        return str(config.launches)
    return f"{config.launches - len(config.failed_launches)} ok; {config.failed_text}"


def _failed_launch_text(failed: Mapping[str, Any]) -> str:
    where = f"attempt {failed.get('attempt')} on {failed.get('host')}"
    log = f" (log {failed['log_path']})" if failed.get("log_path") else ""
    return f"{where}: {failed['status']}: {failed.get('message') or ''}{log}"


def _errored(config: ConfigReport, workload: WorkloadVerdicts) -> bool:
    """A case that measured nothing and has no verdict against a measured history: an error."""
    return not config.measured and not workload.regressed


def junit_xml(report: RegressionReport) -> str:
    cases = [(c, w) for c in report.configs for w in c.workloads] or []
    failed = [(c, w) for c, w in cases if w.regressed or (c.drift and _is_objective(report, w.workload))]
    suite = ET.Element(
        "testsuite",
        name=f"bwtune regression {report.run_id}",
        tests=str(len(cases)),
        failures=str(len(failed)),
        errors=str(sum(1 for c, w in cases if (c, w) not in failed and _errored(c, w))),
        skipped=str(
            sum(1 for c, w in cases if (c, w) not in failed and not _errored(c, w) and _undecided(w))
        ),
        timestamp=report.created_at,
    )
    for config, workload in cases:
        case = ET.SubElement(
            suite, "testcase", classname=f"{config.gpu}.{config.config_id}", name=workload.workload
        )
        bad = [v for v in workload.verdicts if v.verdict == regression.REGRESSION]
        drift = config.drift if config.drift and _is_objective(report, workload.workload) else None
        if bad or drift:
            words = [f"{v.metric} {v.text()}" for v in bad]
            if drift:
                words.append(f"level moved {_pct(drift.change)} from run {drift.run_id} (change point)")
            failure = ET.SubElement(case, "failure", message="; ".join(words), type="regression")
            failure.text = (
                f"config {config.config_id}: {config.label}\nreference run: {config.reference_run}\n"
                f"stack components changed: {regression.attribution_text(config.attribution)}"
            )
        elif _errored(config, workload):
            ET.SubElement(
                case,
                "error",
                message=f"nothing measured: {config.failed_text or config.status}",
                type="nothing measured",
            ).text = "\n".join(_failed_launch_text(f) for f in config.failed_launches)
        elif _undecided(workload):
            notes = "; ".join(f"{v.metric}: {v.note}" for v in workload.verdicts if v.note) or "inconclusive"
            ET.SubElement(case, "skipped", message=notes)
        out = ET.SubElement(case, "system-out")
        out.text = "\n".join(f"{v.metric}: {v.text()}" for v in workload.verdicts)
    suites = ET.Element("testsuites", name="bwtune regress")
    suites.append(suite)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _is_objective(report: RegressionReport, workload: str) -> bool:
    return workload == report.objective.get("workload")


def _undecided(workload: object) -> bool:
    verdicts = getattr(workload, "verdicts", [])
    return bool(verdicts) and all(v.verdict == regression.INCONCLUSIVE for v in verdicts)


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items()) + "}"


def prometheus_text(report: RegressionReport) -> str:
    when = datetime.fromisoformat(report.created_at).timestamp()
    lines = [
        "# HELP bwtune_regression_objective The objective's median in the newest regression run.",
        "# TYPE bwtune_regression_objective gauge",
    ]
    for config in report.configs:
        main = _objective_verdict(report, config)
        if main is not None and main.candidate_median is not None:
            labels = _labels(
                config=config.config_id,
                gpu=config.gpu,
                workload=str(report.objective.get("workload")),
                metric=str(report.objective["metric"]),
            )
            lines.append(f"bwtune_regression_objective{labels} {main.candidate_median!r}")
    lines += [
        "# HELP bwtune_regression_verdict The config's verdict in its newest run (1: this one).",
        "# TYPE bwtune_regression_verdict gauge",
    ]
    for config in report.configs:
        for name in regression.VERDICTS:
            labels = _labels(config=config.config_id, gpu=config.gpu, verdict=name)
            lines.append(f"bwtune_regression_verdict{labels} {int(config.verdict == name)}")
    lines += [
        "# HELP bwtune_regression_last_run_timestamp_seconds When the config's newest run started.",
        "# TYPE bwtune_regression_last_run_timestamp_seconds gauge",
    ]
    for config in report.configs:
        labels = _labels(config=config.config_id, gpu=config.gpu)
        lines.append(f"bwtune_regression_last_run_timestamp_seconds{labels} {when!r}")
    lines += [
        "# HELP bwtune_regression_failed_launches Launches of the config that failed in the newest run.",
        "# TYPE bwtune_regression_failed_launches gauge",
    ]
    for config in report.configs:
        labels = _labels(config=config.config_id, gpu=config.gpu)
        lines.append(f"bwtune_regression_failed_launches{labels} {len(config.failed_launches)}")
    lines += [
        "# HELP bwtune_regression_regressed 1 when the newest regression run found a regression.",
        "# TYPE bwtune_regression_regressed gauge",
        f"bwtune_regression_regressed {int(report.regressed)}",
        "# HELP bwtune_regression_measured 0 when the newest regression run measured nothing.",
        "# TYPE bwtune_regression_measured gauge",
        f"bwtune_regression_measured {int(report.measured)}",
    ]
    return "\n".join(lines) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write next to the target and rename: a reader (the textfile collector) never sees half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_all(report: RegressionReport, directory: Path, textfile: Path | None = None) -> dict[str, Path]:
    """regression.md, junit.xml, bwtune_regression.prom and regression.json (the --json
    shape, which `bwtune report` reads back for the report's section) in `directory`, and
    the textfile also at `textfile`, for node_exporter; returns what was written."""
    written = {
        "json": directory / "regression.json",
        "markdown": directory / "regression.md",
        "junit": directory / "junit.xml",
        "prometheus": directory / "bwtune_regression.prom",
    }
    write_atomic(written["json"], json.dumps(report.to_dict(), indent=1) + "\n")
    write_atomic(written["markdown"], markdown(report))
    write_atomic(written["junit"], junit_xml(report))
    write_atomic(written["prometheus"], prometheus_text(report))
    if textfile is not None:
        write_atomic(textfile, prometheus_text(report))
        written["textfile"] = textfile
    return written
