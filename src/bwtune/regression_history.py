"""A regression run against its history: verdicts, change points and attribution per config.

The history of a config is every run tagged `regression` in the results database with a
line for the same config id on the same hardware group (the line's `gpu`), oldest first.
A launch is one results line (hosts of the group and the attempts of `--repetitions`, kept
by the database as superseded lines, are launches alike). The statistics are in
`bwtune.regression`; this module only reads the database and puts the pieces together.
"""

from __future__ import annotations

import sqlite3
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract as contract
from bwtune import regression, results_db

TAG = "regression"

Key = tuple[str, str]  # (gpu, config id)


@dataclass
class ConfigRun:
    """One config of one run: its launches' samples per (workload, metric), status, stack."""

    run_id: str
    created_at: str
    status: str = contract.OK
    failure_class: str | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    stack: dict[str, Any] | None = None
    stack_fingerprint: str | None = None
    samples: dict[tuple[str, str], list[list[float]]] = field(default_factory=dict)

    def launches(self, workload: str, metric: str) -> list[list[float]]:
        return self.samples.get((workload, metric), [])

    def level(self, workload: str, metric: str) -> float | None:
        values = [v for launch in self.launches(workload, metric) for v in launch]
        return statistics.median(values) if values and self.status == contract.OK else None


def load_run(conn: sqlite3.Connection, run_id: str) -> dict[Key, ConfigRun]:
    """Every config of a run, keyed by (gpu, config id), its launches gathered."""
    created = results_db.get_run(conn, run_id).created_at
    lines = [*results_db.run_results(conn, run_id), *results_db.superseded_results(conn, run_id)]
    configs: dict[Key, ConfigRun] = {}
    for line in lines:
        key = (str(line.get("gpu") or "unknown"), str(line["config_id"]))
        entry = configs.setdefault(key, ConfigRun(run_id, created, flags=dict(line.get("flags") or {})))
        status = str(line.get("status"))
        if status != contract.OK and entry.status == contract.OK:
            # One failed launch in several is a failing config: it did not hold up.
            entry.status, entry.failure_class = status, status
        if line.get("stack") and entry.stack is None:
            entry.stack = dict(line["stack"])
        entry.stack_fingerprint = entry.stack_fingerprint or line.get("stack_fingerprint")
        if status != contract.OK:
            continue
        for workload, block in (line.get("metrics") or {}).items():
            metric_names = {m for rep in block.get("repetitions") or [] for m in rep}
            metric_names |= set(block.get("values") or {})
            for metric in metric_names:
                values = regression.metric_repetitions(line, workload, metric)
                if values:
                    entry.samples.setdefault((workload, metric), []).append(values)
    return configs


@dataclass
class WorkloadVerdicts:
    workload: str
    verdicts: list[regression.Verdict]

    @property
    def regressed(self) -> bool:
        return any(v.verdict == regression.REGRESSION for v in self.verdicts)


@dataclass
class ConfigReport:
    config_id: str
    gpu: str
    label: str
    status: str
    reference_run: str | None
    workloads: list[WorkloadVerdicts]
    history: list[regression.HistoryPoint]
    change_points: list[regression.ChangePoint]
    attribution: list[dict[str, Any]]  # components changed, reference -> this run
    drift: regression.ChangePoint | None  # a recent change point that moved the level the wrong way

    @property
    def regressed(self) -> bool:
        return any(w.regressed for w in self.workloads) or self.drift is not None

    @property
    def verdict(self) -> str:
        """The config's one word: regression if any metric (or the history's level) regressed."""
        names = [v.verdict for w in self.workloads for v in w.verdicts]
        if self.regressed:
            return regression.REGRESSION
        for name in (regression.IMPROVEMENT, regression.INCONCLUSIVE):
            if name in names:
                return name
        return regression.NO_CHANGE


@dataclass
class RegressionReport:
    run_id: str
    created_at: str
    objective: dict[str, Any]
    baseline: dict[str, Any] | None
    settings: regression.Settings
    simulated: bool
    configs: list[ConfigReport]

    @property
    def regressed(self) -> bool:
        return any(c.regressed for c in self.configs)

    def to_dict(self) -> dict[str, Any]:
        return contract.versioned(
            {
                "run_id": self.run_id,
                "created_at": self.created_at,
                "objective": self.objective,
                "baseline": self.baseline,
                "settings": asdict(self.settings),
                "simulated": self.simulated,
                "regressed": self.regressed,
                "configs": [
                    {
                        "config_id": c.config_id,
                        "gpu": c.gpu,
                        "label": c.label,
                        "status": c.status,
                        "verdict": c.verdict,
                        "reference_run": c.reference_run,
                        "workloads": {w.workload: [v.to_dict() for v in w.verdicts] for w in c.workloads},
                        "history": [asdict(p) for p in c.history],
                        "change_points": [cp.to_dict() for cp in c.change_points],
                        "drift": None if c.drift is None else c.drift.to_dict(),
                        "attribution": c.attribution,
                    }
                    for c in self.configs
                ],
            }
        )


def history_runs(conn: sqlite3.Connection, run_id: str, since: str | None = None) -> list[str]:
    """Regression runs before `run_id` (oldest first), from the run `since` on when given."""
    runs = [r for r in results_db.tagged_runs(conn, TAG) if r != run_id]
    created = results_db.get_run(conn, run_id).created_at
    runs = [r for r in runs if (results_db.get_run(conn, r).created_at, r) < (created, run_id)]
    if since is not None and since in runs:
        runs = runs[runs.index(since) :]
    return runs


def analyze(
    conn: sqlite3.Connection,
    run_id: str,
    settings: regression.Settings = regression.DEFAULT_SETTINGS,
    baseline: str | None = None,
) -> RegressionReport:
    """Compare a run with its history config by config.

    The reference of the single comparison is the named baseline's run, else the newest
    earlier regression run in which the config measured ok. Change points run over the
    history from the baseline's run on (all of it without one) plus this run.
    """
    base = results_db.get_baseline(conn, baseline) if baseline else None
    if baseline and base is None:
        raise LookupError(f"--baseline {baseline}: no such baseline (bwtune baseline list shows them)")
    objective = results_db.resolved_objective(conn, run_id)
    run = results_db.get_run(conn, run_id)
    current = load_run(conn, run_id)
    earlier = {
        r: load_run(conn, r) for r in history_runs(conn, run_id, since=base["run_id"] if base else None)
    }
    base_configs = load_run(conn, base["run_id"]) if base else None
    reports = []
    for key in sorted(current):
        reports.append(_config_report(key, current[key], earlier, base_configs, objective, settings))
    simulated = results_db.build_run_output(conn, run_id)["summary"]["simulated"]
    return RegressionReport(run_id, run.created_at, objective, base, settings, simulated, reports)


def _config_report(
    key: Key,
    now: ConfigRun,
    earlier: Mapping[str, Mapping[Key, ConfigRun]],
    base_configs: Mapping[Key, ConfigRun] | None,
    objective: Mapping[str, Any],
    settings: regression.Settings,
) -> ConfigReport:
    gpu, config_id = key
    past = [configs[key] for configs in earlier.values() if key in configs]
    if base_configs is not None:
        reference = base_configs.get(key)
    else:
        reference = next((c for c in reversed(past) if c.status == contract.OK), past[-1] if past else None)
    workload_names = sorted(
        {w for w, _m in now.samples} | ({w for w, _m in reference.samples} if reference else set())
    )
    if not workload_names and objective.get("workload"):
        workload_names = [str(objective["workload"])]
    metrics = [str(objective["metric"]), *regression.KEY_LATENCIES]
    workloads = []
    for workload in workload_names:
        verdicts = []
        for metric in metrics:
            goal = regression.goal_of(metric, objective)
            if reference is None:
                values = [v for launch in now.launches(workload, metric) for v in launch]
                verdicts.append(
                    regression.Verdict(
                        metric,
                        regression.INCONCLUSIVE,
                        goal,
                        candidate_median=statistics.median(values) if values else None,
                        launches=(0, len(now.launches(workload, metric))),
                        note="no earlier run",
                    )
                )
                continue
            by_status = regression.status_verdict(metric, goal, reference.status, now.status)
            if by_status is not None:
                verdicts.append(by_status)
                continue
            if not now.launches(workload, metric) and not reference.launches(workload, metric):
                continue  # the workload does not measure this metric
            others = [c.launches(workload, metric) for c in past if c is not reference]
            verdicts.append(
                regression.compare(
                    reference.launches(workload, metric),
                    now.launches(workload, metric),
                    metric=metric,
                    goal=goal,
                    settings=settings,
                    history=others,
                )
            )
        workloads.append(WorkloadVerdicts(workload, verdicts))
    # The history's level: the objective on its workload.
    o_workload, o_metric = str(objective.get("workload")), str(objective["metric"])
    goal = regression.goal_of(o_metric, objective)
    points = [
        regression.HistoryPoint(
            c.run_id, c.created_at, c.level(o_workload, o_metric), c.status, c.stack, c.stack_fingerprint
        )
        for c in [*past, now]
    ]
    found = regression.change_points(points, goal, settings)
    measured = [p for p in points if p.level is not None]
    recent = {p.run_id for p in measured[-settings.recent_runs :]}
    drift = next(
        (cp for cp in reversed(found) if cp.verdict == regression.REGRESSION and cp.run_id in recent), None
    )
    regressed = any(v.verdict == regression.REGRESSION for w in workloads for v in w.verdicts)
    attribution: list[dict[str, Any]] = []
    if regressed and reference is not None:
        attribution = regression.changed_components(
            {"stack": reference.stack, "stack_fingerprint": reference.stack_fingerprint},
            {"stack": now.stack, "stack_fingerprint": now.stack_fingerprint},
        )
    elif drift is not None:
        attribution = list(drift.components)
    return ConfigReport(
        config_id=config_id,
        gpu=gpu,
        label=_label(now.flags),
        status=now.status,
        reference_run=reference.run_id if reference else None,
        workloads=workloads,
        history=points,
        change_points=found,
        attribution=attribution,
        drift=drift,
    )


def _label(flags: Mapping[str, Any]) -> str:
    text = " ".join(f"{name}={value}" for name, value in sorted(flags.items()) if name not in ("model-path",))
    return text if len(text) <= 120 else text[:117] + "..."


def verdict_counts(report: RegressionReport) -> dict[str, int]:
    counts = dict.fromkeys(regression.VERDICTS, 0)
    for config in report.configs:
        counts[config.verdict] += 1
    return counts


def worst_first(configs: Sequence[ConfigReport]) -> list[ConfigReport]:
    order = {name: i for i, name in enumerate(regression.VERDICTS)}
    return sorted(configs, key=lambda c: (order[c.verdict], c.config_id))
