"""What each sweep strategy costs in GPU-hours and whether it finds the best config.

    .venv/bin/python benchmarks/search_cost.py [--landscapes 50] [--first-seed 0] [--caches cold|warm]
        [--ablations] [--prior] [--json]
    .venv/bin/python benchmarks/search_cost.py --families tuning|held-out | --wide tuning|held-out
        [--family F] [--strategy S] [--budget SHARE]

The mission's matrix (examples/qwen35-397b-nvfp4-sm120.yml) is planned by the real planner
for sm120; each strategy then runs on the mission landscape (the stand-in's default profile)
and on seeded randomized landscapes drawn around it (benchmarks/landscapes.py), against a
simulated clock: no process starts and nothing waits. Decisions come from the node's own
code (plugins/module_utils/_search/strategies.py: run_order, one_axis_at_a_time, screen_workload,
screen_gate); only the measurement is replaced, by `SimulatedNode.launch`, which builds the
results line the sweep would record and charges the clock:

- start-up: the profile's weight_load_s + graph_capture_s (a config that fails in CUDA
  graph capture pays both and stops there);
- the correctness gate: its prompts, one at a time, at the config's single-request speed;
- each workload (screening first for screen/adaptive): warmup, then repetitions of
  ceil(num_prompts / concurrency) rounds of prefill + output_len decode steps at the
  config's per-request speed at that concurrency (the profile's decode curve); a config
  that crashes mid-workload pays half of its first workload;
- stopping the server: STOP_S.
Measurements carry the landscape's launch-to-launch noise (one factor per launch, shared by
its workloads) and 0.5% repetition noise. GPU-hours = seconds x the profile's GPU count.

--prior: each landscape is searched a second time after drift (landscapes.drifted), with the
first (adaptive) run's results as the prior, as `bwtune sweep` reads them from the results
database.

"found": the chosen config (the best by the objective among fully measured lines, as the
report ranks them) is truly within the landscape's noise (one cv) of the best; "regret":
how much slower it truly is.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import landscapes
import plan_10k

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.correctness_prompts import PROMPTS
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._plan import planner
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies
from bwtune.standin.profile import Profile, load_profile

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "qwen35-397b-nvfp4-sm120.yml"
STOP_S = 10.0  # assumption: SIGTERM, the server exits and the GPUs report their memory free
# --caches warm: the stand-in's model of the sweep's shared cache dir (startup_cache.py),
# with its profile's fractions (assumptions, see the profile): the ~250 GB checkpoint stays in
# the page cache of a host with more RAM than that, so every launch after the first reads its
# weights at page_cache_load_fraction of weight_load_s; and a launch whose every axis value
# an earlier launch built (JIT, autotune) spends cached_capture_fraction of graph_capture_s.
REPETITION_CV = 0.005  # spread between repetitions inside one launch
# Side by side: the sweep's strategies, plus auto_benchmark's first tier (one axis at a time).
STRATEGIES = ("grid", "one-axis", "coordinate", "screen", "adaptive")
# --ablations: adaptive with one of its ideas taken out or turned (screening, bound width z,
# the launch budget, finals).
ABLATIONS: dict[str, tuple[bool, dict[str, Any]]] = {
    "adaptive, no screening": (False, {}),
    "adaptive, z=0 (model's best + 3%)": (True, {"z": 0.0}),
    "adaptive, z=2": (True, {"z": 2.0}),
    "adaptive, z=3": (True, {"z": 3.0}),
    "adaptive, no launch budget": (True, {"budget": 1.0}),
    "adaptive, z=2, no launch budget (the previous default)": (True, {"z": 2.0, "budget": 1.0}),
    "adaptive, no finals (no re-measure)": (True, {"finalists": 0}),
}
# --prior: a second run of each landscape, drifted (landscapes.drifted), with the first
# (adaptive) run's results as the prior; adaptive with the prior, and with each of its ideas
# taken out or turned.
PRIOR_VARIANTS: dict[str, dict[str, Any]] = {
    "adaptive + prior (skip values 50% behind)": {},
    "adaptive + prior, start from its best only (no value skipped)": {"prior_margin": 1e9},
    "adaptive + prior, skip values 100% behind": {"prior_margin": 1.0},
    "adaptive + prior, skip values 25% behind": {"prior_margin": 0.25},
    "adaptive + prior, no finals": {"finalists": 0},
}


@dataclass
class Outcome:
    strategy: str
    landscape: str
    kind: str
    seconds: float
    gpu_hours: float
    launches: int
    full: int  # launches that ran the full workloads
    chosen: str | None
    regret: float
    found: bool


class SimulatedNode:
    """One host: launches a config on a landscape, returns its results line, keeps the clock."""

    def __init__(
        self,
        profile: Profile,
        plan: dict[str, Any],
        landscape: landscapes.Landscape,
        seed: int,
        warm_caches: bool = False,
    ):
        self.profile = profile
        self.warm_caches = warm_caches
        self.points = {c["id"]: c["point"] for c in plan["configs"]}
        self.built: set[tuple[str, str]] = set()  # (axis, value) whose kernels a launch compiled
        self.plan = plan
        self.landscape = landscape
        self.workloads = {launch["config"]: launch["workloads"] for launch in plan["launches"]}
        self.rng = random.Random(seed)
        self.seconds = 0.0
        self.launches = 0
        self.full = 0

    def _speed(self, config_id: str, concurrency: int) -> float:
        ratios = self.landscape.batch_ratio[config_id]
        batch = min(ratios, key=lambda b: abs(b - concurrency))
        return self.landscape.value[config_id] * ratios[batch]

    def _prefill_s(self, tokens: int) -> float:
        return self.profile.prefill_overhead_ms / 1000.0 + tokens / self.profile.prefill_tokens_per_s

    def workload_s(self, config_id: str, workload: dict[str, Any]) -> float:
        concurrency = int(workload.get("concurrency") or workload["num_prompts"])
        speed = self._speed(config_id, concurrency)
        warmup = self._prefill_s(workload["input_len"]) + min(workload["output_len"], 16) / speed
        rounds = math.ceil(workload["num_prompts"] / concurrency)
        one = rounds * (self._prefill_s(workload["input_len"] * concurrency) + workload["output_len"] / speed)
        return warmup * bool(workload.get("warmup", 1)) + one * int(workload.get("repetitions", 1))

    def _block(self, value: float, factor: float, repetitions: int, metric: str) -> dict[str, Any]:
        samples = [value * factor * self.rng.gauss(1.0, REPETITION_CV) for _ in range(repetitions)]
        mean, ci, _cv = results_contract.mean_ci95(samples)
        block: dict[str, Any] = {"n": repetitions, "values": {metric: mean}}
        if ci is not None:
            block["ci95"] = {metric: list(ci)}
        return block

    def startup_s(self, config_id: str) -> float:
        """Weights and CUDA graphs (with compile/autotune), cold or from the caches."""
        if not self.warm_caches:
            return self.profile.weight_load_s + self.profile.graph_capture_s
        kernels = {(axis, repr(value)) for axis, value in self.points[config_id].items()}
        page_cache = self.profile.page_cache_load_fraction if self.launches > 1 else 1.0
        weights = self.profile.weight_load_s * page_cache
        jit = self.profile.cached_capture_fraction if kernels <= self.built else 1.0
        capture = self.profile.graph_capture_s * jit
        self.built |= kernels
        return weights + capture

    def launch(self, config_id: str, scores: strategies.Scoreboard, screening: bool) -> dict[str, Any]:
        self.launches += 1
        fail = self.landscape.fails.get(config_id)
        objective = scores.objective
        metrics: dict[str, Any] = {}
        line: dict[str, Any] = {"config_id": config_id, "host": "sim", "status": "ok", "metrics": metrics}
        line["screened_out"] = False
        self.seconds += STOP_S + self.startup_s(config_id)
        if fail == "capture":
            return dict(line, status=results_contract.UNSUPPORTED_HARDWARE)
        speed = self.landscape.value[config_id]
        self.seconds += sum(self._prefill_s(64) + p.max_new_tokens / speed for p in PROMPTS)
        factor = self.rng.gauss(1.0, self.landscape.noise(config_id))
        workloads = list(self.workloads[config_id])
        if screening:
            workloads.insert(0, strategies.screen_workload(workloads, objective.workload))
        for workload in workloads:
            duration = self.workload_s(config_id, workload)
            if fail == "workload" and workload["name"] != results_contract.SCREEN_WORKLOAD:
                self.seconds += duration / 2
                return dict(line, status=results_contract.CRASHED, metrics={})
            self.seconds += duration
            concurrency = int(workload.get("concurrency") or workload["num_prompts"])
            value = self._speed(config_id, concurrency)
            metrics[workload["name"]] = self._block(
                value, factor, int(workload.get("repetitions", 1)), objective.metric
            )
            if workload["name"] == results_contract.SCREEN_WORKLOAD and not strategies.screen_gate(
                scores, metrics[results_contract.SCREEN_WORKLOAD]
            ):
                return dict(line, screened_out=True)
        self.full += 1
        return line


def order(
    name: str,
    plan: dict[str, Any],
    scores: strategies.Scoreboard,
    matrix: dict[str, Any],
    prior: dict[str, float] | None = None,
) -> Iterator[str]:
    axes, baseline = matrix.get("axes") or {}, matrix.get("baseline")
    if name == "one-axis":
        return strategies.one_axis_at_a_time(plan, scores, axes, baseline)
    if name in ABLATIONS:
        return strategies.adaptive(plan, scores, axes, baseline, prior=prior, **ABLATIONS[name][1])
    return strategies.run_order(name, plan, scores, axes, baseline, prior=prior)


def prior_of(scores: strategies.Scoreboard) -> dict[str, float]:
    """What a later run reads from the results database about this one (bwtune sweep's
    prior): each launched config's objective value (the mean of its launches), else the
    value of its screening workload."""
    prior: dict[str, float] = {}
    for config_id in scores.history:
        value = scores.pooled(config_id)
        if value is None:
            value = scores.pooled(config_id, results_contract.SCREEN_WORKLOAD)
        if value is not None:
            prior[config_id] = value
    return prior


def run_one(
    name: str,
    profile: Profile,
    plan: dict[str, Any],
    matrix: dict[str, Any],
    landscape: landscapes.Landscape,
    seed: int,
    warm_caches: bool = False,
    prior: dict[str, float] | None = None,
    keep: list[strategies.Scoreboard] | None = None,
) -> Outcome:
    scores = strategies.Scoreboard(strategies.Objective.from_matrix({**matrix, **plan}))
    if keep is not None:
        keep.append(scores)
    node = SimulatedNode(profile, plan, landscape, seed, warm_caches)
    screening = ABLATIONS[name][0] if name in ABLATIONS else name in strategies.SCREENING
    for config_id in order(name, plan, scores, matrix, prior):
        # A re-measure (adaptive's finals) runs the full workloads only (strategies.needs_screen).
        scores.record(node.launch(config_id, scores, screening and scores.launches(config_id) == 0))
    chosen = scores.best()
    regret = landscape.regret(chosen)
    return Outcome(
        strategy=name,
        landscape=landscape.name,
        kind=landscape.kind,
        seconds=node.seconds,
        gpu_hours=node.seconds * profile.gpu.count / 3600.0,
        launches=node.launches,
        full=node.full,
        chosen=chosen,
        regret=regret,
        found=regret <= landscape.cv,
    )


def mission_plan() -> tuple[dict[str, Any], dict[str, Any]]:
    matrix = yaml.safe_load(EXAMPLE.read_text())
    return matrix, planner.plan(matrix, gpu="sm120").to_dict()


# The wide matrix (issue 24): the mission widened to 9 x 5 x 4 x 5 x 6 = 5,400 combinations
# (benchmarks/plan_10k.py's widened_matrix, fewer values); SM120's rules prune most of it, and the
# matrix excludes MTP below mem-fraction-static 0.85 (this benchmark's choice, as a user's
# exclude would be, not an SGLang rule), leaving 648 launches.
WIDE_AXES: dict[str, list[Any]] = {
    **plan_10k.AXES_10K,
    "moe-runner-backend": plan_10k.AXES_10K["moe-runner-backend"][:9],  # not triton_kernel
    "mem-fraction-static": [0.80, 0.82, 0.84, 0.85, 0.86, 0.88],
}


def wide_plan() -> tuple[dict[str, Any], dict[str, Any]]:
    matrix = plan_10k.widened_matrix(WIDE_AXES)
    matrix["exclude"] = [
        {"mem-fraction-static": mem, "speculative": spec}
        for mem in (0.80, 0.82, 0.84)
        for spec in ("mtp1", "mtp2", "mtp3", "mtp3-no-radix")
    ]
    return matrix, planner.plan(matrix, gpu="sm120").to_dict()


def unpruned_grid(grid: Outcome, profile: Profile, pruned: int, warm_caches: bool) -> Outcome:
    """The grid as tools without bwtune's rules run it: the pruned configs are launched too,
    load their weights and fail in CUDA graph capture (the stand-in's faults for them)."""
    weights = profile.weight_load_s * (profile.page_cache_load_fraction if warm_caches else 1.0)
    seconds = grid.seconds + pruned * (STOP_S + weights + profile.graph_capture_s)
    return Outcome(
        **dict(
            grid.__dict__,
            strategy=UNPRUNED,
            seconds=seconds,
            gpu_hours=seconds * profile.gpu.count / 3600.0,
            launches=grid.launches + pruned,
        )
    )


UNPRUNED = "grid, unpruned"


def run(
    count: int,
    first_seed: int,
    strategies_run: tuple[str, ...] = STRATEGIES,
    warm_caches: bool = False,
) -> dict[str, Any]:
    profile = load_profile()
    matrix, plan = mission_plan()
    axes = matrix["axes"]
    worlds = [landscapes.mission(profile, plan)]
    worlds += [
        landscapes.randomized(profile, plan, axes, seed) for seed in range(first_seed, first_seed + count)
    ]
    summary = plan["summary"]
    outcomes = []
    for n, world in enumerate(worlds):
        for name in strategies_run:
            outcome = run_one(name, profile, plan, matrix, world, 1000 + n, warm_caches)
            if name == "grid":
                outcomes.append(unpruned_grid(outcome, profile, summary["pruned"], warm_caches))
            outcomes.append(outcome)
    return {
        "plan": {
            "combinations": summary["combinations"],
            "excluded": summary["excluded"],
            "pruned": summary["pruned"],
            "duplicates": summary["duplicates"],
            "launches": summary["launches"],
        },
        "profile": profile.name,
        "caches": "warm" if warm_caches else "cold",
        "outcomes": [o.__dict__ for o in outcomes],
    }


def table(result: dict[str, Any]) -> str:
    outcomes = result["outcomes"]
    grid = {o["landscape"]: o["gpu_hours"] for o in outcomes if o["strategy"] == "grid"}
    full = {o["landscape"]: o["gpu_hours"] for o in outcomes if o["strategy"] == UNPRUNED}
    rows = [
        "| strategy | mission: GPU-h / launches / found / regret | landscapes | GPU-h mean | % of grid "
        "| % of unpruned grid | launches mean (full) | true best found | regret mean | regret max |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    names = list(dict.fromkeys(o["strategy"] for o in outcomes))
    for name in names:
        mine = [o for o in outcomes if o["strategy"] == name]
        mission = next(o for o in mine if o["landscape"] == "mission")
        rand = [o for o in mine if o["landscape"] != "mission"]
        share = statistics.fmean(o["gpu_hours"] / grid[o["landscape"]] for o in rand)
        share_full = statistics.fmean(o["gpu_hours"] / full[o["landscape"]] for o in rand)
        rows.append(
            f"| {name} | {mission['gpu_hours']:.1f} / {mission['launches']} / "
            f"{'yes' if mission['found'] else 'no'} / {100 * mission['regret']:.1f}% | {len(rand)} "
            f"| {statistics.fmean(o['gpu_hours'] for o in rand):.1f} | {100 * share:.0f}% "
            f"| {100 * share_full:.0f}% "
            f"| {statistics.fmean(o['launches'] for o in rand):.1f} "
            f"({statistics.fmean(o['full'] for o in rand):.1f}) "
            f"| {sum(o['found'] for o in rand)}/{len(rand)} "
            f"| {100 * statistics.fmean(o['regret'] for o in rand):.2f}% "
            f"| {100 * max(o['regret'] for o in rand):.1f}% |"
        )
    return "\n".join(rows)


def by_kind(result: dict[str, Any], name: str) -> str:
    rows = ["| kind | landscapes | found | regret mean | launches mean |", "|---|---|---|---|---|"]
    mine = [o for o in result["outcomes"] if o["strategy"] == name and o["landscape"] != "mission"]
    for kind in landscapes.KINDS:
        of_kind = [o for o in mine if o["kind"] == kind]
        if of_kind:
            rows.append(
                f"| {kind} | {len(of_kind)} | {sum(o['found'] for o in of_kind)} "
                f"| {100 * statistics.fmean(o['regret'] for o in of_kind):.2f}% "
                f"| {statistics.fmean(o['launches'] for o in of_kind):.1f} |"
            )
    return "\n".join(rows)


def flat_table(names: tuple[str, ...], warm_caches: bool = False, repeats: int = 10) -> str:
    """Each strategy on the flat landscape (no axis matters), over `repeats` noise seeds."""
    profile = load_profile()
    matrix, plan = mission_plan()
    world = landscapes.flat(profile, plan)
    rows = ["| strategy on the flat landscape | % of grid | launches mean |", "|---|---|---|"]
    grid = statistics.fmean(
        run_one("grid", profile, plan, matrix, world, n, warm_caches).gpu_hours for n in range(repeats)
    )
    for name in names:
        runs = [run_one(name, profile, plan, matrix, world, n, warm_caches) for n in range(repeats)]
        share = statistics.fmean(o.gpu_hours for o in runs) / grid
        rows.append(f"| {name} | {100 * share:.0f}% | {statistics.fmean(o.launches for o in runs):.1f} |")
    return "\n".join(rows)


def second_runs(
    count: int, first_seed: int, warm_caches: bool = False
) -> dict[str, list[tuple[Outcome, float]]]:
    """Each landscape searched a second time after drift: (outcome, grid GPU-h) per variant."""
    profile = load_profile()
    matrix, plan = mission_plan()
    axes = matrix["axes"]
    rows: dict[str, list[tuple[Outcome, float]]] = {
        "adaptive, no prior": [],
        **{n: [] for n in PRIOR_VARIANTS},
    }
    for seed in range(first_seed, first_seed + count):
        first = landscapes.randomized(profile, plan, axes, seed)
        kept: list[strategies.Scoreboard] = []
        run_one("adaptive", profile, plan, matrix, first, 1000 + seed, warm_caches, keep=kept)
        prior = prior_of(kept[0])
        again = landscapes.drifted(first, plan, axes, 5000 + seed)
        grid = run_one("grid", profile, plan, matrix, again, 3000 + seed, warm_caches).gpu_hours
        rows["adaptive, no prior"].append(
            (run_one("adaptive", profile, plan, matrix, again, 3000 + seed, warm_caches), grid)
        )
        for name, knobs in PRIOR_VARIANTS.items():
            ABLATIONS[name] = (True, knobs)
            outcome = run_one(name, profile, plan, matrix, again, 3000 + seed, warm_caches, prior=prior)
            rows[name].append((outcome, grid))
    return rows


def second_table(rows: dict[str, list[tuple[Outcome, float]]]) -> str:
    out = [
        "| second run (drifted), prior from the first | % of grid | launches mean (full) | true best found "
        "| regret mean | regret max |",
        "|---|---|---|---|---|---|",
    ]
    for name, runs in rows.items():
        share = statistics.fmean(o.gpu_hours / grid for o, grid in runs)
        out.append(
            f"| {name} | {100 * share:.0f}% | {statistics.fmean(o.launches for o, _ in runs):.1f} "
            f"({statistics.fmean(o.full for o, _ in runs):.1f}) "
            f"| {sum(o.found for o, _ in runs)}/{len(runs)} "
            f"| {100 * statistics.fmean(o.regret for o, _ in runs):.2f}% "
            f"| {100 * max(o.regret for o, _ in runs):.1f}% |"
        )
    return "\n".join(out)


def _values(point: dict[str, Any]) -> set[tuple[str, str]]:
    return {(axis, repr(value)) for axis, value in point.items()}


def jit_cold_launches(plan: dict[str, Any]) -> tuple[int, int]:
    """`grid`'s JIT-cold launches (one with an axis value no earlier launch built) in plan
    order, and in a cover-first order (greedily, the config that brings the most values not
    built yet, then the rest in plan order): what ordering for warm caches could save."""
    points = {c["id"]: c["point"] for c in plan["configs"]}
    valid = [launch["config"] for launch in plan["launches"]]

    def cold(order: list[str]) -> int:
        built: set[tuple[str, str]] = set()
        count = 0
        for config_id in order:
            count += not _values(points[config_id]) <= built
            built |= _values(points[config_id])
        return count

    built: set[tuple[str, str]] = set()
    cover: list[str] = []
    rest = list(valid)
    while rest:
        pick = max(rest, key=lambda c: len(_values(points[c]) - built))
        if not _values(points[pick]) - built:
            break
        cover.append(pick)
        rest.remove(pick)
        built |= _values(points[pick])
    return cold(valid), cold(cover + rest)


FAMILY_STRATEGIES = ("grid", "coordinate", "screen", "adaptive")


GENERATOR = "generator's kinds"


def budget_variant(share: float) -> str:
    """The name of `adaptive` with a launch budget of ``share`` of the valid configs (an
    ablation row of --families/--wide, ``--budget``); registered in ABLATIONS."""
    name = f"adaptive, budget {share:g}"
    ABLATIONS[name] = (True, {"budget": share})
    return name


def families(
    seeds: str,
    strategies_run: tuple[str, ...] = FAMILY_STRATEGIES,
    count: int | None = None,
    only: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    """Every strategy on every stress family (landscapes.FAMILIES) and on the generator's own
    kinds, on the tuning or the held-out seeds: one row per (family, strategy). ``only``
    limits the families (GENERATOR for the generator's kinds)."""
    profile = load_profile()
    matrix, plan = mission_plan()
    axes = matrix["axes"]
    announced = _announced(plan, matrix, strategies_run)
    picked = list(landscapes.TUNING_SEEDS if seeds == "tuning" else landscapes.HELD_OUT_SEEDS)
    if count is not None:
        picked = picked[:count]
    worlds: dict[str, list[landscapes.Landscape]] = {}
    for kind in landscapes.FAMILIES:
        if only is not None and kind not in only:
            continue
        worlds[kind] = [landscapes.family(profile, plan, axes, kind, seed) for seed in picked]
    # The generator's own kinds, on seeds it was never tuned on (20000+ held out, 30000+ tuning).
    offset = 20000 if seeds == "held-out" else 30000
    if only is None or GENERATOR in only:
        own = [landscapes.randomized(profile, plan, axes, offset + n) for n in range(len(picked) * 5 // 4)]
        worlds[GENERATOR] = own
    return _family_rows(worlds, profile, plan, matrix, strategies_run, announced)


def _announced(
    plan: dict[str, Any], matrix: dict[str, Any], strategies_run: tuple[str, ...]
) -> dict[str, int]:
    """The most launches `bwtune plan` announces per strategy (adaptive: also while every
    launch fails, each config once until one runs, then at most the finals)."""
    announced = {
        name: strategies.planned_launches(plan, matrix["axes"], matrix.get("baseline"))[name][1]
        for name in strategies_run
        if name in strategies.STRATEGIES
    }
    if "adaptive" in announced:
        announced["adaptive"] = max(
            announced["adaptive"], strategies.launches_while_nothing_runs(plan) + strategies.REMEASURES
        )
    # A budget variant (--budget) announces what adaptive would with that budget: its
    # one-axis pass or its share of the valid configs, and each config once while nothing runs.
    for name in strategies_run:
        if name in ABLATIONS and "budget" in ABLATIONS[name][1]:
            valid = strategies.launches_while_nothing_runs(plan)
            first = strategies.planned_launches(plan, matrix["axes"], matrix.get("baseline"))["adaptive"][0]
            share = ABLATIONS[name][1]["budget"]
            searched = min(valid, max(first, math.ceil(share * valid - 1e-9)))
            announced[name] = max(searched, valid) + strategies.REMEASURES
    return announced


WIDE_STRATEGIES = ("grid", "adaptive")


def wide(
    seeds: str, strategies_run: tuple[str, ...] = WIDE_STRATEGIES, count: int | None = None
) -> list[dict[str, Any]]:
    """The generator's kinds (landscapes.randomized) drawn on the wide matrix (wide_plan), on
    the stress families' tuning or held-out seeds: one row per strategy."""
    profile = load_profile()
    matrix, plan = wide_plan()
    picked = list(landscapes.TUNING_SEEDS if seeds == "tuning" else landscapes.HELD_OUT_SEEDS)
    if count is not None:
        picked = picked[:count]
    lands = [landscapes.randomized(profile, plan, matrix["axes"], seed) for seed in picked]
    summary = plan["summary"]
    label = f"wide matrix ({summary['combinations']:,} combinations, {summary['launches']} launches)"
    return _family_rows(
        {label: lands}, profile, plan, matrix, strategies_run, _announced(plan, matrix, strategies_run)
    )


def _family_rows(
    worlds: dict[str, list[landscapes.Landscape]],
    profile: Profile,
    plan: dict[str, Any],
    matrix: dict[str, Any],
    strategies_run: tuple[str, ...],
    announced: dict[str, int],
) -> list[dict[str, Any]]:
    rows = []
    for kind, lands in worlds.items():
        outs: dict[str, list[Outcome]] = {name: [] for name in strategies_run}
        for n, world in enumerate(lands):
            for name in strategies_run:
                outs[name].append(run_one(name, profile, plan, matrix, world, 7000 + n))
        grid = [o.gpu_hours for o in outs["grid"]] if "grid" in outs else None
        for name, runs in outs.items():
            rows.append(
                {
                    "family": kind,
                    "strategy": name,
                    "landscapes": len(runs),
                    "share": statistics.fmean(o.gpu_hours / g for o, g in zip(runs, grid, strict=True))
                    if grid
                    else None,
                    "found": sum(o.found for o in runs),
                    "regret_mean": statistics.fmean(o.regret for o in runs),
                    "regret_max": max(o.regret for o in runs),
                    "launches_max": max(o.launches for o in runs),
                    "announced": announced.get(name),
                    "over_announced": sum(o.launches > announced.get(name, 10**9) for o in runs),
                }
            )
    return rows


def families_table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| family | strategy | share of grid GPU-h | found | regret mean | regret max "
        "| launches max / announced (runs over) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['family']} ({r['landscapes']}) | {r['strategy']} | {100 * r['share']:.0f}% "
            f"| {r['found']} | {100 * r['regret_mean']:.2f}% | {100 * r['regret_max']:.1f}% "
            f"| {r['launches_max']} / {r['announced']} ({r['over_announced']}) |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--landscapes", type=int, default=50, help="randomized landscapes (default 50)")
    parser.add_argument("--first-seed", type=int, default=0, help="seed of the first landscape")
    parser.add_argument("--json", action="store_true", help="every outcome as JSON")
    parser.add_argument("--ablations", action="store_true", help="also adaptive without each of its ideas")
    parser.add_argument(
        "--prior", action="store_true", help="also each landscape searched again after drift, with a prior"
    )
    parser.add_argument(
        "--caches",
        choices=("cold", "warm"),
        default="cold",
        help="start-up model: warm reads the profile's cache fractions (see SimulatedNode.startup_s)",
    )
    parser.add_argument(
        "--families",
        choices=("tuning", "held-out"),
        help="the stress families (landscapes.FAMILIES) and the generator's kinds, on their tuning "
        "or held-out seeds, every strategy",
    )
    parser.add_argument(
        "--wide",
        choices=("tuning", "held-out"),
        help="the generator's kinds on the wide matrix (wide_plan: 5,400 combinations), grid and "
        "adaptive, on the families' tuning or held-out seeds",
    )
    parser.add_argument(
        "--family",
        action="append",
        choices=(*landscapes.FAMILIES, GENERATOR),
        help="with --families: only this family (repeatable)",
    )
    parser.add_argument(
        "--strategy",
        action="append",
        choices=FAMILY_STRATEGIES,
        help="with --families or --wide: only this strategy (repeatable; grid is always run: the share)",
    )
    parser.add_argument(
        "--budget",
        action="append",
        type=float,
        metavar="SHARE",
        help="with --families or --wide: also adaptive with this launch budget, a share of the valid "
        "configs in (0, 1] (repeatable; the default is strategies.ADAPTIVE_BUDGET)",
    )
    args = parser.parse_args(argv)
    for share in args.budget or ():
        if not 0.0 < share <= 1.0:
            parser.error(f"--budget {share:g}: a share of the valid configs, above 0 and at most 1")
    if args.budget and not (args.families or args.wide):
        parser.error("--budget needs --families or --wide")
    if args.families or args.wide:
        count = args.landscapes if "--landscapes" in (argv or sys.argv) else None
        if count is not None and count < 1:
            parser.error("--landscapes must be at least 1")
        picked = ("grid", *(s for s in args.strategy if s != "grid")) if args.strategy else None
        if args.budget:
            base = picked or (FAMILY_STRATEGIES if args.families else WIDE_STRATEGIES)
            picked = (*base, *(budget_variant(share) for share in args.budget))
        if args.families:
            only = tuple(args.family) if args.family else None
            rows = families(args.families, picked or FAMILY_STRATEGIES, count=count, only=only)
        else:
            rows = wide(args.wide, picked or WIDE_STRATEGIES, count=count)
        if args.json:
            json.dump(rows, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print(families_table(rows))
        return 0
    if args.landscapes < 1:
        parser.error("--landscapes must be at least 1")
    names = STRATEGIES + tuple(ABLATIONS) if args.ablations else STRATEGIES
    result = run(args.landscapes, args.first_seed, names, warm_caches=args.caches == "warm")
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    p = result["plan"]
    print(
        f"plan: {p['combinations']} combinations, {p['excluded']} excluded, {p['pruned']} pruned, "
        f"{p['duplicates']} duplicates -> {p['launches']} launches "
        f"(profile {result['profile']}, {result['caches']} caches)"
    )
    print(table(result))
    if args.caches == "warm":
        plan_order, cover_first = jit_cold_launches(mission_plan()[1])
        print(f"grid's JIT-cold launches: {plan_order} in plan order, {cover_first} cover-first")
    print()
    print(flat_table(names, warm_caches=args.caches == "warm"))
    print()
    print("adaptive by landscape kind:")
    print(by_kind(result, "adaptive"))
    if args.prior:
        print()
        print(second_table(second_runs(args.landscapes, args.first_seed, warm_caches=args.caches == "warm")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
