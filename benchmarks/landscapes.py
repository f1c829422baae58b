"""Performance landscapes for the search-cost benchmark: what each config of a plan would measure.

A landscape gives every valid config of a plan its true objective value (single-request decode
tok/s, `output_tok_s_per_request` of the `single` workload), the launch-to-launch noise, and
the configs that fail late (after the weights are loaded). The mission landscape is the
stand-in's default profile as it is; the randomized ones are drawn around it, seeded:

- every landscape: each axis value's factor perturbed (lognormal, sigma 8%) and two axes
  that interact (a factor per pair of their values, sigma 4%);
- kind `interaction`: one pair of values of the two interacting axes is 8-20% faster
  together than apart;
- kind `corner`: the perturbations are redrawn so that the config with the last value of
  every axis is the best, 2-8% ahead per axis;
- kind `near-tie`: the second best is within half the noise of the best;
- kind `high-noise`: launch-to-launch noise 5-8% instead of the profile's 2%;
- kind `late-failures`: three configs fail after loading (CUDA graph capture, or a crash
  in the middle of the first workload).

Stress families (issue 24), drawn from their descriptions, never from the strategy's code; each
is tuned on seeds TUNING_SEEDS and reported on HELD_OUT_SEEDS (never tuned on):

- `combination`: the best config wins only as a combination: each of its values looks
  mediocre alone (its one-axis neighbours are middling), it is 4-10% ahead of the best other;
  configs sharing two of its values get a third of that bonus (a pairwise hint);
- `clustered-failures`: 20-30% of the configs fail after loading, most of them on one value
  of one axis (70-90% of that value's configs), the rest scattered;
- `heteroscedastic`: one value of the MoE or attention axis is 8-10% noisy launch to launch,
  the rest 1%; the noisy value's configs are among the fastest;
- `plateau-peak`: every config within 0.5% of one level, one config 4-10% higher and its
  one-axis neighbours a quarter of that;
- `mostly-failing`: all but 1-3 configs fail after loading.

Nothing here decides what to launch: benchmarks/search_cost.py drives the sweep's strategies.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from bwtune.standin.performance import ConfigPerformance
from bwtune.standin.profile import Profile

KINDS = ("interaction", "corner", "near-tie", "high-noise", "late-failures")
FAMILIES = ("combination", "clustered-failures", "heteroscedastic", "plateau-peak", "mostly-failing")
# Seeds of the stress families: strategy changes are tuned on the first, reported on the second.
TUNING_SEEDS = range(100, 140)
HELD_OUT_SEEDS = range(9000, 9040)
MAIN_SIGMA = 0.08
PAIR_SIGMA = 0.04


@dataclass
class Landscape:
    name: str
    kind: str
    cv: float  # launch-to-launch spread of a measurement (one standard deviation, relative)
    value: dict[str, float]  # config id -> true objective value (tok/s per request, single)
    batch_ratio: dict[str, dict[int, float]]  # config id -> batch size -> per-request speed / single
    fails: dict[str, str] = field(default_factory=dict)  # config id -> "capture" | "workload"
    # config id -> its own launch-to-launch spread, where it is not `cv` (heteroscedastic)
    cv_of: dict[str, float] = field(default_factory=dict)

    def noise(self, config_id: str) -> float:
        return self.cv_of.get(config_id, self.cv)

    def best(self) -> str:
        """The true best config among those that do not fail (ties: the first id)."""
        ok = sorted(c for c in self.value if c not in self.fails)
        return max(ok, key=lambda c: self.value[c])

    def regret(self, chosen: str | None) -> float:
        """How much slower the chosen config truly is than the best (1.0: nothing chosen)."""
        if chosen is None or chosen in self.fails:
            return 1.0
        return 1.0 - self.value[chosen] / self.value[self.best()]


def _valid(plan: dict[str, Any]) -> list[dict[str, Any]]:
    valid = {launch["config"] for launch in plan["launches"]}
    return [c for c in plan["configs"] if c["id"] in valid]


def _profile_values(
    profile: Profile, plan: dict[str, Any]
) -> tuple[dict[str, float], dict[str, dict[int, float]]]:
    values: dict[str, float] = {}
    ratios: dict[str, dict[int, float]] = {}
    batches = sorted({1, *(int(w.get("concurrency") or 1) for w in plan["launches"][0]["workloads"])})
    for config in _valid(plan):
        perf = ConfigPerformance.for_flags(profile, config["flags"])
        single = perf.decode_tok_s_per_request(1)
        values[config["id"]] = single
        ratios[config["id"]] = {b: perf.decode_tok_s_per_request(b) / single for b in batches}
    return values, ratios


def mission(profile: Profile, plan: dict[str, Any]) -> Landscape:
    """The profile's own landscape: no perturbation, the profile's noise, no late failures."""
    values, ratios = _profile_values(profile, plan)
    return Landscape("mission", "profile", profile.cv, values, ratios)


def flat(profile: Profile, plan: dict[str, Any]) -> Landscape:
    """Every config as fast as the profile's baseline: no axis matters, only the noise does."""
    values, ratios = _profile_values(profile, plan)
    level = values[plan["launches"][0]["config"]]
    return Landscape("flat", "flat", profile.cv, dict.fromkeys(values, level), ratios)


def randomized(profile: Profile, plan: dict[str, Any], axes: dict[str, list[Any]], seed: int) -> Landscape:
    rng = random.Random(seed)
    kind = KINDS[seed % len(KINDS)]
    base, ratios = _profile_values(profile, plan)
    configs = _valid(plan)
    names = list(axes)
    main = {(a, repr(v)): math.exp(rng.gauss(0.0, MAIN_SIGMA)) for a in names for v in axes[a]}
    first, second = rng.sample(names, 2)
    pair = {
        (repr(x), repr(y)): math.exp(rng.gauss(0.0, PAIR_SIGMA)) for x in axes[first] for y in axes[second]
    }
    if kind == "interaction":
        cell = rng.choice(sorted(pair))
        pair[cell] *= 1.0 + rng.uniform(0.08, 0.20)
    if kind == "corner":
        corner = max(configs, key=lambda c: sum(axes[a].index(c["point"][a]) for a in names))
        _make_corner_best(rng, base, configs, axes, main, corner)

    def value(config: dict[str, Any]) -> float:
        point = config["point"]
        factor = math.prod(main[(a, repr(point[a]))] for a in names)
        return base[config["id"]] * factor * pair[(repr(point[first]), repr(point[second]))]

    values = {c["id"]: value(c) for c in configs}
    cv = profile.cv
    if kind == "high-noise":
        cv = rng.uniform(0.05, 0.08)
    fails: dict[str, str] = {}
    if kind == "late-failures":
        for n, config_id in enumerate(rng.sample(sorted(values), 3)):
            fails[config_id] = ("capture", "workload")[n % 2]
    landscape = Landscape(f"seed{seed}", kind, cv, values, ratios, fails)
    if kind == "near-tie":
        ranked = sorted((c for c in values if c not in fails), key=lambda c: -values[c])
        values[ranked[1]] = values[ranked[0]] * (1.0 - rng.uniform(0.0, 0.5) * cv)
    return landscape


# A second run of the same matrix on the same hardware group, some time later (--prior):
# every axis value's factor drifts (lognormal, DRIFT_SIGMA: a new driver, a busier host) and
# one value of one axis moves by DRIFT_STEP (a backend's new release), up or down.
DRIFT_SIGMA = 0.03
DRIFT_STEP = (0.05, 0.15)


def drifted(first: Landscape, plan: dict[str, Any], axes: dict[str, list[Any]], seed: int) -> Landscape:
    """The landscape a later run of the same matrix meets: `first` with drift."""
    rng = random.Random(seed)
    names = list(axes)
    factor = {(a, repr(v)): math.exp(rng.gauss(0.0, DRIFT_SIGMA)) for a in names for v in axes[a]}
    step_axis = rng.choice(names)
    step_value = repr(rng.choice(axes[step_axis]))
    factor[(step_axis, step_value)] *= 1.0 + rng.choice((-1, 1)) * rng.uniform(*DRIFT_STEP)
    points = {c["id"]: c["point"] for c in _valid(plan)}
    values = {
        c: v * math.prod(factor[(a, repr(points[c][a]))] for a in names) for c, v in first.value.items()
    }
    return Landscape(
        f"{first.name}-again", first.kind, first.cv, values, first.batch_ratio, dict(first.fails)
    )


def _make_corner_best(
    rng: random.Random,
    base: dict[str, float],
    configs: list[dict[str, Any]],
    axes: dict[str, list[Any]],
    main: dict[tuple[str, str], float],
    corner: dict[str, Any],
) -> None:
    """Redraw the corner's value on each axis so that, everything else equal, it beats the
    best other value of that axis by 2-8% (measured on the profile's own speeds)."""
    by_point = {tuple(sorted((a, repr(v)) for a, v in c["point"].items())): c["id"] for c in configs}
    for axis, values in axes.items():
        speeds: dict[str, float] = {}
        for v in values:
            key = tuple(sorted((a, repr(v if a == axis else corner["point"][a])) for a in axes))
            if key in by_point:
                speeds[repr(v)] = base[by_point[key]] * main[(axis, repr(v))]
        mine = repr(corner["point"][axis])
        others = [s for v, s in speeds.items() if v != mine]
        if mine in speeds and others:
            target = max(others) * (1.0 + rng.uniform(0.02, 0.08))
            main[(axis, mine)] *= target / speeds[mine]


def _points(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c["point"] for c in _valid(plan)}


def _differs(a: dict[str, Any], b: dict[str, Any]) -> int:
    return sum(a[k] != b[k] for k in a)


def family(
    profile: Profile, plan: dict[str, Any], axes: dict[str, list[Any]], kind: str, seed: int
) -> Landscape:
    """One landscape of a stress family (FAMILIES), seeded."""
    rng = random.Random(seed * 7919 + FAMILIES.index(kind))
    base, ratios = _profile_values(profile, plan)
    points = _points(plan)
    ids = sorted(points)
    names = list(axes)
    main = {(a, repr(v)): math.exp(rng.gauss(0.0, MAIN_SIGMA)) for a in names for v in axes[a]}
    values = {c: base[c] * math.prod(main[(a, repr(points[c][a]))] for a in names) for c in ids}
    cv = profile.cv
    fails: dict[str, str] = {}
    cv_of: dict[str, float] = {}
    if kind == "combination":
        # A target whose one-axis neighbours are middling: rank configs by value, pick one in
        # the middle third, then lift it alone above the best.
        ranked = sorted(ids, key=lambda c: values[c])
        target = rng.choice(ranked[len(ranked) // 3 : 2 * len(ranked) // 3])
        bonus = rng.uniform(0.04, 0.10)
        top = max(values[c] for c in ids if c != target)
        lift = top * (1.0 + bonus) / values[target]
        values[target] *= lift
        # the pairwise hint: configs sharing the target's values on two axes get a third
        first, second = rng.sample(names, 2)
        for c in ids:
            if (
                c != target
                and points[c][first] == points[target][first]
                and points[c][second] == points[target][second]
            ):
                values[c] = min(values[c] * (1.0 + bonus / 3.0), values[target] / (1.0 + bonus / 2.0))
    elif kind == "clustered-failures":
        share = rng.uniform(0.20, 0.30)
        wanted = round(share * len(ids))
        axis = rng.choice([a for a in names if len(axes[a]) >= 3])
        value = rng.choice(axes[axis])
        cluster = [c for c in ids if points[c][axis] == value]
        n_cluster = min(len(cluster), max(1, round(rng.uniform(0.7, 0.9) * len(cluster))), wanted)
        chosen = rng.sample(cluster, n_cluster)
        rest = [c for c in ids if c not in chosen]
        chosen += rng.sample(rest, max(0, wanted - n_cluster))
        for n, c in enumerate(sorted(chosen)):
            fails[c] = ("capture", "workload")[n % 2]
    elif kind == "heteroscedastic":
        cv = 0.01
        axis = rng.choice(["moe-runner-backend", "attention-backend"])
        noisy = rng.choice(axes[axis])
        # the noisy value is among the fastest on its axis: lift it to 0-3% above the best other
        others = [main[(axis, repr(v))] for v in axes[axis] if v != noisy]
        lifted = max(others) * (1.0 + rng.uniform(-0.02, 0.03))
        scale = lifted / main[(axis, repr(noisy))]
        spread = rng.uniform(0.08, 0.10)
        for c in ids:
            if points[c][axis] == noisy:
                values[c] *= scale
                cv_of[c] = spread
    elif kind == "plateau-peak":
        level = base[plan["launches"][0]["config"]]
        values = {c: level * math.exp(rng.gauss(0.0, 0.005 / 2)) for c in ids}
        peak = rng.choice(ids)
        bump = rng.uniform(0.04, 0.10)
        for c in ids:
            if _differs(points[c], points[peak]) == 1:
                values[c] *= 1.0 + bump / 4.0
        values[peak] = level * (1.0 + bump)
    elif kind == "mostly-failing":
        keep = rng.sample(ids, rng.randint(1, 3))
        for n, c in enumerate(c for c in ids if c not in keep):
            fails[c] = ("capture", "workload")[n % 2]
    else:
        raise ValueError(f"unknown family {kind!r}")
    return Landscape(f"{kind}-{seed}", kind, cv, values, ratios, fails, cv_of)
