"""A bisection's plan from two stored runs: what `bwtune bisect GOOD BAD` prints (issue 28).

Reads the good and the bad run's lines of one config from the results database (the bad
run's best by the store's own pick, `pick_best`, unless a config is named; the same config
id in the good run), takes each side's `stack`, and makes the plan with
`component_ranges.make_plan`. Candidate versions come from a file (YAML or JSON: component
-> versions oldest first, each a string or {version, note}); without one a component has
its two ends. The stored launches of both runs are compared as `bwtune regress` compares
them (`regression.compare` on the objective). Nothing is built or launched here: measuring
the steps is not built yet (docs/bisect.md).
"""

from __future__ import annotations

import itertools
import json
import math
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import regression, regression_history, store
from bwtune.bisect.bisection import Settings
from bwtune.bisect.component_ranges import FOLLOWS, NAMES, BisectError, BisectPlan, Candidate, make_plan

NOT_BUILT_YET = (
    "measuring these steps on the runs' hosts is not built yet; SGLang commits can be bisected on this "
    "machine with the stand-in: bwtune bisect GOOD BAD --measure --local --checkout DIR (docs/bisect.md)"
)


@dataclass(frozen=True)
class Side:
    """One run's lines of the config: its stack and its ok launches' objective values."""

    run_id: str
    hosts: tuple[str, ...]
    stack: dict[str, Any]
    launches: list[list[float]]
    failed: dict[str, int] = field(default_factory=dict)  # failed launches by class

    @property
    def measured(self) -> bool:
        return bool(self.launches)


@dataclass(frozen=True)
class StepBudget:
    """The most steps a bisection of the plan would measure, and what goes into it."""

    ends: int  # both ends
    alone: int  # each component alone (0 when one component differs: the bad end is it)
    bisect: dict[str, int]  # component -> ceil(log2(versions - 1)) midpoints
    pairs: int  # pair steps, only when no component regresses alone
    pairs_bisect: int  # bisecting both components of every pair, each with the other held
    linear: int  # a linear search at most: both ends, then every version of each component

    @property
    def alone_path(self) -> int:
        return self.ends + self.alone + sum(self.bisect.values())

    @property
    def pairs_path(self) -> int:
        return self.ends + self.alone + self.pairs + self.pairs_bisect

    @property
    def most(self) -> int:
        return max(self.alone_path, self.pairs_path) if self.pairs or self.pairs_bisect else self.alone_path


@dataclass(frozen=True)
class RunsPlan:
    good: Side
    bad: Side
    config_id: str
    host: str | None
    objective: dict[str, Any]
    plan: BisectPlan
    sources: dict[str, str]  # component -> where its versions come from
    verdict: regression.Verdict
    budget: StepBudget
    settings: Settings

    @property
    def reproduced(self) -> bool:
        """The bad run measurably worse than the good one, by measured values."""
        return self.verdict.verdict == regression.REGRESSION and self.verdict.change is not None

    def followers(self) -> list[dict[str, Any]]:
        keys = self.plan.keys()
        return [
            {"component": f, "name": NAMES[f], "follows": leader, "before": self.plan.good.get(f),
             "after": self.plan.bad.get(f)}
            for f, leader in FOLLOWS.items()
            if leader in keys and self.plan.good.get(f) != self.plan.bad.get(f)
        ]  # fmt: skip

    def not_reproduced_text(self) -> str:
        v = self.verdict
        if v.failure_class:
            return (
                f"not reproduced: the bad run's launches of {self.config_id} {v.failure_class} "
                "(a bisection compares measured launches; a bad end that cannot launch is untestable)"
            )
        return (
            f"not reproduced: the bad run {self.bad.run_id} is not measurably worse than the good "
            f"run {self.good.run_id} on {self.config_id} ({v.text()}{'; ' + v.note if v.note else ''}); "
            "a bisection would stop after measuring both ends"
        )

    def lines(self) -> list[str]:
        s, b, o = self.settings, self.budget, self.objective
        where = f" on host {self.host}" if self.host else f" (hosts: {', '.join(self.bad.hosts)})"
        out = [
            f"bisect plan: run {self.good.run_id} (good) -> run {self.bad.run_id} (bad), "
            f"config {self.config_id}{where}",
            f"objective: {o.get('goal')} {o.get('metric')} on {o.get('workload')} (median of every "
            f"repetition of the ok launches): good {_num(self.verdict.reference_median)} "
            f"({_launches(self.good)}), bad {_num(self.verdict.candidate_median)} "
            f"({_launches(self.bad)}): {self.verdict.text()}"
            + (f" — {self.verdict.note}" if self.verdict.note else ""),
            "components that differ (good -> bad), in the order they would be bisected:",
        ]
        for c in self.plan.components:
            steps = b.bisect[c.key]
            out.append(
                f"  {c.name}: {c.good} -> {c.bad}: {len(c.versions)} candidates ({self.sources[c.key]}); "
                + (f"bisecting it takes at most {steps} steps" if steps else "nothing between them to bisect")
            )
        for f in self.followers():
            out.append(f"  {f['name']}: {f['before']} -> {f['after']}: follows {NAMES[f['follows']]}")
        alone = f"each component alone {b.alone}" if b.alone else "the component alone is the bad end"
        out.append(
            f"steps: at most {b.most} measured: both ends {b.ends}, {alone}, bisecting "
            f"{sum(b.bisect.values())}"
            + (
                f"; if no component regresses alone: {b.pairs} pair steps and {b.pairs_bisect} "
                f"bisecting each of a pair with the other held ({b.pairs_path} in all)"
                if b.pairs or b.pairs_bisect
                else ""
            )
            + "; each untestable version skipped adds one"
        )
        out.append(
            f"launches: {s.first_launches} per step, {s.more_launches} more while undecided, up to "
            f"{s.max_launches}: at most {b.most * s.max_launches} ({b.most * s.first_launches} at "
            f"{s.first_launches} a step)"
        )
        out.append(f"builds: at most {b.most} stacks (one per step, the ends included)")
        out.append(f"a linear search: at most {b.linear} steps")
        return out

    def to_dict(self) -> dict[str, Any]:
        b, s = self.budget, self.settings
        return contract.versioned(
            {
                "good_run": self.good.run_id,
                "bad_run": self.bad.run_id,
                "config_id": self.config_id,
                "host": self.host,
                "hosts": {"good": list(self.good.hosts), "bad": list(self.bad.hosts)},
                "objective": self.objective,
                "verdict": self.verdict.to_dict(),
                "verdict_text": self.verdict.text(),
                "reproduced": self.reproduced,
                "failed_launches": {"good": self.good.failed, "bad": self.bad.failed},
                "components": [
                    {
                        "component": c.key,
                        "name": c.name,
                        "good": c.good,
                        "bad": c.bad,
                        "candidates": len(c.versions),
                        "source": self.sources[c.key],
                        "bisect_steps": b.bisect[c.key],
                    }
                    for c in self.plan.components
                ],
                "followers": self.followers(),
                "plan": self.plan.to_dict(),
                "steps": {
                    "most": b.most,
                    "ends": b.ends,
                    "alone": b.alone,
                    "bisect": sum(b.bisect.values()),
                    "pairs": b.pairs,
                    "pairs_bisect": b.pairs_bisect,
                    "linear": b.linear,
                    "untested_skips": "each untestable version skipped adds one step",
                },
                "launches": {
                    "first": s.first_launches,
                    "more": s.more_launches,
                    "max_per_step": s.max_launches,
                    "most": b.most * s.max_launches,
                },
                "builds": {"most": b.most},
                "measured": False,
                "not_built": NOT_BUILT_YET,
            }
        )


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _launches(side: Side) -> str:
    failed = sum(side.failed.values())
    text = f"{len(side.launches)} ok launches"
    if failed:
        text += "; failed: " + ", ".join(f"{k} {n}" for k, n in sorted(side.failed.items()))
    return text


# --------------------------------------------------------------------------- candidates


def load_candidates(path: str | Path) -> dict[str, list[Candidate]]:
    """A candidates file: {component: [version | {version, note}, ...]}, oldest first.
    YAML or JSON (YAML reads JSON). BisectError, one line naming the file, otherwise."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BisectError(f"--candidates {path}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise BisectError(f"--candidates {path}: not YAML or JSON{at}") from None
    if not isinstance(data, Mapping) or not data:
        raise BisectError(f"--candidates {path}: a mapping of component -> list of versions, oldest first")
    found: dict[str, list[Candidate]] = {}
    for key, listed in data.items():
        if not isinstance(listed, list):
            raise BisectError(f"--candidates {path}: {key}: a list of versions, oldest first")
        versions = []
        for item in listed:
            if isinstance(item, Mapping):
                if item.get("version") is None or set(item) - {"version", "note"}:
                    raise BisectError(
                        f"--candidates {path}: {key}: {dict(item)!r}: give version and note only"
                    )
                versions.append(Candidate(str(item["version"]), str(item.get("note") or "")))
            elif isinstance(item, (str, int, float)) and not isinstance(item, bool):
                versions.append(Candidate(str(item)))
            else:
                raise BisectError(f"--candidates {path}: {key}: {item!r} is not a version")
        found[str(key)] = versions
    return found


# --------------------------------------------------------------------------- the runs


def _lines(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    return [*store.superseded_results(conn, run_id), *store.run_results(conn, run_id)]


def _side(
    run_id: str, which: str, lines: Sequence[Mapping[str, Any]], config_id: str, host: str | None,
    objective: Mapping[str, Any], named: str,
) -> Side:  # fmt: skip
    mine = [line for line in lines if str(line.get("config_id")) == config_id]
    if not mine:
        raise BisectError(f"{named}: not in the {which} run {run_id}")
    if host is not None:
        mine = [line for line in mine if str(line.get("host")) == host]
        if not mine:
            raise BisectError(
                f"--host {host}: the {which} run {run_id} has no line of config {config_id} there"
            )
    hosts = tuple(sorted({str(line.get("host")) for line in mine}))
    stacks = {
        _stack_text(line.get("stack")): line.get("stack")
        for line in mine
        if contract.is_launched(line.get("status"))
    } or {_stack_text(line.get("stack")): line.get("stack") for line in mine}
    if len(stacks) > 1:
        raise BisectError(
            f"the {which} run {run_id}: config {config_id} ran on {len(stacks)} stacks "
            f"(hosts {', '.join(hosts)}): name one host with --host"
        )
    (stack,) = stacks.values()
    if not isinstance(stack, Mapping):
        fingerprint = next(
            (line.get("stack_fingerprint") for line in mine if line.get("stack_fingerprint")), None
        )
        raise BisectError(
            f"the {which} run {run_id}: config {config_id}'s lines record no stack components "
            f"(stack fingerprint {fingerprint}): nothing to bisect from"
        )
    launches: list[list[float]] = []
    failed: dict[str, int] = {}
    for line in mine:
        status = str(line.get("status"))
        if status == contract.OK:
            values = contract.metric_repetitions(line, objective)
            if values:
                launches.append(values)
        elif contract.is_launched(status):
            failed[status] = failed.get(status, 0) + 1
    return Side(run_id, hosts, dict(stack), launches, failed)


def _stack_text(stack: Any) -> str:
    return json.dumps(stack, sort_keys=True, default=str)


def budget(plan: BisectPlan) -> StepBudget:
    sizes = {c.key: len(c.versions) for c in plan.components}
    n = len(sizes)
    bisect = {key: math.ceil(math.log2(m - 1)) if m > 2 else 0 for key, m in sizes.items()}
    # One component: its bad value alone is the bad end; two: their pair is the bad end.
    alone = n if n >= 2 else 0
    pairs = math.comb(n, 2) if n >= 3 else 0
    pairs_bisect = sum(bisect[a] + bisect[b] for a, b in itertools.combinations(sizes, 2))
    # As BisectReport counts it: both ends, then each component's versions after its good one.
    linear = 2 + sum(m - 1 for m in sizes.values())
    return StepBudget(2, alone, bisect, pairs, pairs_bisect, linear)


def plan_from_runs(
    conn: sqlite3.Connection,
    good_run: str,
    bad_run: str,
    *,
    config_id: str | None = None,
    host: str | None = None,
    candidates: Mapping[str, Sequence[str | Candidate]] | None = None,
    candidates_source: str | None = None,
    settings: Settings | None = None,
) -> RunsPlan:
    """The plan between two stored runs on one config. BisectError (one line) for bad input;
    store.UnknownRunError for a run the database lacks."""
    settings = settings or Settings()
    objective = store.resolved_objective(conn, bad_run)
    bad_lines = _lines(conn, bad_run)
    good_lines = _lines(conn, good_run)
    named = f"--config {config_id}"
    if config_id is None:
        pool = [line for line in bad_lines if host is None or str(line.get("host")) == host]
        best = contract.pick_best(pool, objective)
        if best is None:
            where = f" on host {host}" if host else ""
            raise BisectError(
                f"the bad run {bad_run} has no measured config{where} to pick: name one with --config"
            )
        config_id = str(best["config_id"])
        named = f"config {config_id} (the bad run's best; --config names another)"
    bad = _side(bad_run, "bad", bad_lines, config_id, host, objective, named)
    good = _side(good_run, "good", good_lines, config_id, host, objective, named)
    try:
        plan = make_plan(good.stack, bad.stack, candidates)
    except BisectError as err:  # a candidates list that does not fit: name the file it came from
        message = str(err.args[0] if err.args else err)
        if candidates_source and message.startswith("candidates for "):
            raise BisectError(f"--candidates {candidates_source}: {message}") from None
        raise
    sources = {
        c.key: (
            f"from {candidates_source or 'the candidates'}"
            if candidates and c.key in candidates
            else "its two ends"
        )
        for c in plan.components
    }
    goal = regression.goal_of(str(objective.get("metric")), objective)
    status = regression.status_verdict(
        str(objective.get("metric")), goal,
        contract.OK if good.measured else _failure(good), contract.OK if bad.measured else _failure(bad),
    )  # fmt: skip
    verdict = status or regression.compare(
        good.launches, bad.launches, metric=str(objective.get("metric")), goal=goal, settings=settings.stats
    )
    return RunsPlan(
        good, bad, config_id, host, dict(objective), plan, sources, verdict, budget(plan),
        Settings(**{**settings.__dict__, "metric": str(objective.get("metric")), "goal": goal}),
    )  # fmt: skip


def _failure(side: Side) -> str:
    return max(side.failed, key=lambda k: side.failed[k]) if side.failed else "not measured"


# --------------------------------------------------------------------------- regress's offer


def bisect_commands(report: regression_history.RegressionReport) -> list[str]:
    """The `bwtune bisect GOOD BAD --config ID` of each config `bwtune regress` found regressed
    with a stack change it can bisect (components recorded, no driver change): the good run
    is the config's reference (or, for a drift alone, the change point's last good run)."""
    commands = []
    for config in report.configs:
        if not config.regressed or not config.attribution:
            continue
        keys = {c["component"] for c in config.attribution}
        if "stack_fingerprint" in keys or "driver" in keys:
            continue  # components not recorded, or the host's driver: nothing a bisection builds
        if config.drift is not None and not any(
            v.verdict == regression.REGRESSION for w in config.workloads for v in w.verdicts
        ):
            good, bad = config.drift.last_good_run, config.drift.run_id
        else:
            good, bad = config.reference_run, report.run_id
        if good and bad and good != bad:
            commands.append(f"bwtune bisect {good} {bad} --config {config.config_id}")
    return commands
