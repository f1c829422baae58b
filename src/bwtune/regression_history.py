"""A regression run against its history: verdicts, change points and attribution per config.

The history of a config is every run tagged `regression` in the results database with a
line for the same config id on the same hardware (bwtune.analysis.hardware_group's
same_hardware: the line's SM, and GPU count, model and interconnect where the runs kept
their hosts' GPU facts; a stack change is what it looks for), oldest first.
A launch is one results line (hosts of the group and the attempts of `--repetitions`, kept
by the database as superseded lines, are launches alike). The statistics are in
`bwtune.regression`; this module only reads the database and puts the pieces together.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import regression, store
from bwtune.analysis.hardware_group import HardwareGroup

TAG = "regression"
# What "objective" means in every output of a regression run (stdout, regression.md, the report).
STATISTIC = "median of every repetition of the ok launches in the run"

# The metric of a capacity workload (plugins/module_utils/_bench/capacity_search.py, docs/capacity.md).
CAPACITY = "capacity"
Key = tuple[str, str]  # (HardwareGroup.hardware_key(), config id)


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
    group: HardwareGroup = field(default_factory=HardwareGroup)  # its hardware (stack not part)
    samples: dict[tuple[str, str], list[list[float]]] = field(default_factory=dict)
    ok_launches: int = 0  # launches (results lines) that measured
    # The launches that did not: {"host", "attempt", "status", "message", "log_path"} each,
    # oldest first. Never a value: the ok launches are what is compared.
    failed_launches: list[dict[str, Any]] = field(default_factory=list)

    def launches(self, workload: str, metric: str) -> list[list[float]]:
        return self.samples.get((workload, metric), [])

    @property
    def measured(self) -> bool:
        """At least one launch measured ok (a failed launch beside it is told, not hidden)."""
        return self.ok_launches > 0

    @property
    def launch_count(self) -> int:
        return self.ok_launches + len(self.failed_launches)

    def failed_text(self) -> str:
        """ "crashed 1 of 8 launches" ("" when every launch was ok)."""
        if not self.failed_launches:
            return ""
        counts: dict[str, int] = {}
        for failed in self.failed_launches:
            counts[failed["status"]] = counts.get(failed["status"], 0) + 1
        each = ", ".join(f"{name} {n}" for name, n in counts.items())
        return f"{each} of {self.launch_count} launches"

    def level(self, workload: str, metric: str) -> float | None:
        """The median of the ok launches' repetitions (None: no launch measured)."""
        values = [v for launch in self.launches(workload, metric) for v in launch]
        return statistics.median(values) if values else None


def load_run(conn: sqlite3.Connection, run_id: str) -> dict[Key, ConfigRun]:
    """Every config of a run, keyed by (hardware, config id), its launches gathered."""
    created = store.get_run(conn, run_id).created_at
    current = store.run_results(conn, run_id)
    attempts = store.result_attempts(conn, run_id)
    for line in current:
        line.setdefault("attempt", attempts.get((line["host"], line["config_id"])))
    lines = [*store.superseded_results(conn, run_id), *current]
    lines.sort(
        key=lambda line: (str(line.get("host")), str(line["config_id"]), int(line.get("attempt") or 0))
    )
    kept = {host["host"]: host.get("gpu_facts") for host in store.run_hosts(conn, run_id)}
    configs: dict[Key, ConfigRun] = {}
    for line in lines:
        group = HardwareGroup.of_result(line, kept.get(str(line.get("host"))))
        group = dataclasses.replace(group, stack_fingerprint=None)
        key = (group.hardware_key(), str(line["config_id"]))
        entry = configs.setdefault(
            key, ConfigRun(run_id, created, flags=dict(line.get("flags") or {}), group=group)
        )
        status = str(line.get("status"))
        if status != contract.OK and entry.status == contract.OK:
            # One failed launch in several is a failing config: it did not hold up.
            entry.status, entry.failure_class = status, status
        if line.get("stack") and entry.stack is None:
            entry.stack = dict(line["stack"])
        entry.stack_fingerprint = entry.stack_fingerprint or line.get("stack_fingerprint")
        if status != contract.OK and not contract.is_launched(status):
            continue  # pruned, duplicate: the plan's decision, no launch (the status says it)
        if status != contract.OK:
            failure = line.get("failure") or {}
            entry.failed_launches.append(
                {
                    "host": line.get("host"),
                    "attempt": line.get("attempt"),
                    "status": status,
                    "message": failure.get("message") or "",
                    "log_path": failure.get("log_path") or line.get("log_path"),
                }
            )
            continue
        entry.ok_launches += 1
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
    launches: int = 0  # this run's launches of the config
    failed_launches: list[dict[str, Any]] = field(default_factory=list)  # ConfigRun.failed_launches
    failed_text: str = ""  # "crashed 1 of 8 launches"
    hardware_group: dict[str, Any] = field(default_factory=dict)  # HardwareGroup.as_dict, no stack

    @property
    def measured(self) -> bool:
        """At least one launch of this run measured the config."""
        return len(self.failed_launches) < self.launches

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

    @property
    def measured(self) -> bool:
        """At least one config measured in this run: without that, no verdict says anything."""
        return any(c.measured for c in self.configs)

    @property
    def outcome(self) -> str:
        """regression, nothing measured (never "no regression"), or no regression."""
        if self.regressed:
            return "regression"
        return "no regression" if self.measured else "nothing measured"

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
                "measured": self.measured,
                "outcome": self.outcome,
                "statistic": STATISTIC,
                "configs": [
                    {
                        "config_id": c.config_id,
                        "gpu": c.gpu,
                        "hardware_group": c.hardware_group,
                        "label": c.label,
                        "status": c.status,
                        "launches": c.launches,
                        "failed_launches": c.failed_launches,
                        "failed": c.failed_text,
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
    runs = [r for r in store.tagged_runs(conn, TAG) if r != run_id]
    created = store.get_run(conn, run_id).created_at
    runs = [r for r in runs if (store.get_run(conn, r).created_at, r) < (created, run_id)]
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
    base = store.get_baseline(conn, baseline) if baseline else None
    if baseline and base is None:
        raise LookupError(f"--baseline {baseline}: no such baseline (bwtune baseline list shows them)")
    objective = store.resolved_objective(conn, run_id)
    run = store.get_run(conn, run_id)
    current = load_run(conn, run_id)
    earlier = {
        r: load_run(conn, r) for r in history_runs(conn, run_id, since=base["run_id"] if base else None)
    }
    base_configs = load_run(conn, base["run_id"]) if base else None
    reports = []
    for key in sorted(current):
        reports.append(_config_report(key, current[key], earlier, base_configs, objective, settings))
    simulated = store.build_run_output(conn, run_id)["summary"]["simulated"]
    return RegressionReport(run_id, run.created_at, objective, base, settings, simulated, reports)


def same_config(configs: Mapping[Key, ConfigRun], key: Key, group: HardwareGroup) -> ConfigRun | None:
    """The run's entry for the config on the same hardware: the same key, else (a run that
    kept fewer of its hosts' GPU facts) the first of that config whose group is
    same_hardware as `group`."""
    if key in configs:
        return configs[key]
    return next(
        (configs[k] for k in sorted(configs) if k[1] == key[1] and configs[k].group.same_hardware(group)),
        None,
    )


def _config_report(
    key: Key,
    now: ConfigRun,
    earlier: Mapping[str, Mapping[Key, ConfigRun]],
    base_configs: Mapping[Key, ConfigRun] | None,
    objective: Mapping[str, Any],
    settings: regression.Settings,
) -> ConfigReport:
    config_id = key[1]
    past = [c for c in (same_config(configs, key, now.group) for configs in earlier.values()) if c]
    if base_configs is not None:
        reference = same_config(base_configs, key, now.group)
    else:
        # Every launch ok first, else one that measured beside a failed launch (its ok
        # launches are the values; the failure was told in its own run), else the newest.
        reference = next(
            (c for c in reversed(past) if c.status == contract.OK),
            next((c for c in reversed(past) if c.measured), past[-1] if past else None),
        )
    workload_names = sorted(
        {w for w, _m in now.samples} | ({w for w, _m in reference.samples} if reference else set())
    )
    if not workload_names and objective.get("workload"):
        workload_names = [str(objective["workload"])]
    metrics = [str(objective["metric"]), *regression.KEY_LATENCIES]
    workloads = []
    for workload in workload_names:
        verdicts = []
        # A capacity workload (docs/capacity.md) is compared by its capacity alone: its other
        # values are the last passing round's, measured at that config's own rate, so a
        # latency there moves with the capacity found, not with the stack.
        capacity = any((workload, CAPACITY) in c.samples for c in (now, reference) if c is not None)
        for metric in [CAPACITY] if capacity else metrics:
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
                        failure_class=None if now.measured else now.failure_class,
                        note="; ".join(x for x in ("no earlier run", _failed_note(now, "this run")) if x),
                    )
                )
                continue
            # A side that measured nothing is compared by its status; a side that measured is
            # "ok" here even beside a failed launch: a failure is never a value.
            by_status = regression.status_verdict(
                metric,
                goal,
                contract.OK if reference.measured else reference.status,
                contract.OK if now.measured else now.status,
            )
            if by_status is not None:
                verdicts.append(by_status)
                continue
            if not now.launches(workload, metric) and not reference.launches(workload, metric):
                continue  # the workload does not measure this metric
            others = [c.launches(workload, metric) for c in past if c is not reference]
            by_values = regression.compare(
                reference.launches(workload, metric),
                now.launches(workload, metric),
                metric=metric,
                goal=goal,
                settings=settings,
                history=others,
            )
            verdicts.append(_with_failed_launches(by_values, reference, now))
        workloads.append(WorkloadVerdicts(workload, verdicts))
    # The history's level: the objective on its workload.
    o_workload, o_metric = str(objective.get("workload")), str(objective["metric"])
    goal = regression.goal_of(o_metric, objective)
    points = [
        regression.HistoryPoint(
            c.run_id,
            c.created_at,
            c.level(o_workload, o_metric),
            c.status,
            c.stack,
            c.stack_fingerprint,
            launches=c.launch_count,
            failed_launches=len(c.failed_launches),
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
        gpu=now.group.sm or "unknown",
        hardware_group={k: v for k, v in now.group.as_dict().items() if k != "stack_fingerprint"},
        label=_label(now.flags),
        status=now.status,
        reference_run=reference.run_id if reference else None,
        workloads=workloads,
        history=points,
        change_points=found,
        attribution=attribution,
        drift=drift,
        launches=now.launch_count,
        failed_launches=list(now.failed_launches),
        failed_text=now.failed_text(),
    )


def _failed_note(run: ConfigRun, side: str) -> str:
    return f"{side}: {run.failed_text()}" if run.failed_launches else ""


def _with_failed_launches(
    verdict: regression.Verdict, reference: ConfigRun, now: ConfigRun
) -> regression.Verdict:
    """The values' verdict, told about failed launches on either side. A failed launch in this
    run where the reference's all measured is a regression carrying its class (the values of
    the ok launches stay in the verdict); failed launches of the reference only get a note:
    they were told in their own run, and its ok launches are what is compared."""
    notes = [x for x in (_failed_note(now, "this run"), _failed_note(reference, "the reference")) if x]
    if not notes:
        return verdict
    note = "; ".join(
        [*notes, *([f"the ok launches: {verdict.text()}"] if verdict.change is not None else [])]
    )
    if verdict.note:
        note = f"{note}; {verdict.note}"
    fields = {**dataclasses.asdict(verdict), "launches": verdict.launches, "note": note}
    if now.failed_launches and not reference.failed_launches:
        fields.update(verdict=regression.REGRESSION, failure_class=now.failure_class)
    return regression.Verdict(**fields)


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
