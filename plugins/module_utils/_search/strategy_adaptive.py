# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The ``adaptive`` strategy: one axis at a time from the baseline, then the configs a
main-effects model of the measured landscape (strategy_model) says can still win, within its
budget, spending the finals' re-measures on untested configs on a flat top (``is_flat``), and
guided by a prior when earlier runs measured the plan (split from strategies.py, which
re-exports its public names)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategy_model
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_finals import (
    FINALISTS,
    REMEASURES,
    REPEATS,
    finals,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_one_axis import (
    Space,
    one_axis_at_a_time,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_scores import (
    NOISE_Z,
    Scoreboard,
    launch_noise,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategy_screening import SCREEN

Levels = tuple[str, ...]

# adaptive: a config can still win when its prediction plus ADAPTIVE_Z errors of one score
# (the measured noise, or the model's misfit when larger: interactions), scaled by how rarely
# its values were measured, beats the best score by more than the measured noise. A wide
# bound (z = 4) finds interactions a main-effects model cannot see; ADAPTIVE_BUDGET caps the
# distinct configs launched, failed ones included (the plan announces it: planned_launches).
ADAPTIVE_Z = 4.0
ADAPTIVE_BUDGET = 1.0 / 3.0
# Kept for callers: the finals' sizes are the shared ones above.
ADAPTIVE_FINALISTS = FINALISTS
ADAPTIVE_REPEATS = REPEATS
# A value whose launches failed: each failure is evidence that the value (and the configs
# that share it) fails; a config's bound is lowered by log(1 - p) per such value, p the
# value's failure rate with one success assumed (Laplace), at most FAIL_CAP of it.
FAIL_CAP = 0.95
# With a prior (earlier runs' values on the same hardware group) adaptive starts from the
# prior's best config, and an axis value the prior puts more than PRIOR_MARGIN behind the best
# value of its axis (here: 1.5x slower) is not tried. Chosen on the tuning seeds' second runs
# (docs/benchmarks.md: 0.25 misses more after drift, 1.0 costs 3 points more, finds no more).
PRIOR_MARGIN = 0.5


def adaptive_score(scores: Scoreboard, config_id: str) -> float | None:
    """What ``adaptive`` compares configs by: the screening value (every adaptive launch has
    one, the same short workload for all), else the objective's value, as a log score."""
    value = scores.pooled(config_id, SCREEN)
    if value is None:
        value = scores.pooled(config_id)
    return None if value is None else strategy_model.score(value, scores.objective.goal)


def _failure_penalty(space: Space, scores: Scoreboard, names: list[str]) -> dict[tuple[str, str], float]:
    """(axis, value key) -> log(1 - p): what the failed launches say of the configs that share
    a value with them. Each failure is blamed on its config's values in proportion to how often
    each failed elsewhere (a value that also ran fine takes little of it: the crash is
    explained by its neighbour); p is the value's blame over its launches, one success assumed.
    """
    ok: dict[tuple[str, str], int] = {}
    failed: dict[tuple[str, str], int] = {}
    failures: list[list[tuple[str, str]]] = []
    for config_id in space.valid:
        line = scores.results.get(config_id)
        if line is None:
            continue
        keys = list(
            zip(names, strategy_model.levels_of(space.configs[config_id]["point"], names), strict=True)
        )
        counts = ok if line.get("status") == "ok" else failed
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
        if line.get("status") != "ok":
            failures.append(keys)
    rate = {key: f / (f + ok.get(key, 0) + 1.0) for key, f in failed.items()}
    blame: dict[tuple[str, str], float] = {}
    for keys in failures:
        total = math.fsum(rate[k] for k in keys)
        for key in keys:
            blame[key] = blame.get(key, 0.0) + rate[key] / total
    return {key: math.log(1.0 - min(FAIL_CAP, b / (b + ok.get(key, 0) + 1.0))) for key, b in blame.items()}


def adaptive(
    plan: dict[str, Any],
    scores: Scoreboard,
    axes: dict[str, list[Any]],
    baseline: dict[str, Any] | None = None,
    error: float | None = None,
    z: float | None = None,
    finalists: int | None = None,
    repeats: int | None = None,
    margin: float | None = None,
    prior: dict[str, float] | None = None,
    prior_margin: float | None = None,
    budget: float | None = None,
) -> Iterator[str]:
    """One axis at a time from the baseline, the best value of each axis combined, then
    model-guided launches until no config left can beat the best measured one by more than
    the noise this run measured; then ``finals``.

    After each launch a main-effects model (strategy_model) is fitted to every score so
    far. Each config not launched yet gets an optimistic bound: its prediction plus ``z``
    errors of one score (the measured noise, or the model's misfit when larger) times the
    model's spread for its values, lowered for values whose launches failed
    (``_failure_penalty``). A value only ever measured in failed launches is predicted at its
    axis's worst effect, not "unmeasured". The next launch is the config with the highest
    bound (a value never launched comes first); the search stops when no bound beats the
    best measured score by more than the noise, or once ``budget`` (a share) of the valid
    configs has been launched, failed ones included: the plan announces it. On a flat top
    (``is_flat``: the configs measured differ no more than the launch noise makes one config's
    launches differ) the finals' re-measures go to untested configs instead, while it stays
    flat: re-measuring configs the data cannot tell apart ranks nothing, and the distinct
    configs plus the re-measures keep the announced budget. When most launches failed, the
    failures are everywhere and no config is left out for its values' failures. Every decision
    reads only the scoreboard, in plan order: a resumed sweep decides the same.
    ``error`` and ``margin``, when given, replace the measured noise (ablations).
    """
    z = ADAPTIVE_Z if z is None else z
    finalists = FINALISTS if finalists is None else finalists
    repeats = REPEATS if repeats is None else repeats
    budget = ADAPTIVE_BUDGET if budget is None else budget
    space = Space(plan)
    names = list(axes)
    cap = math.ceil(budget * len(space.valid) - 1e-9)
    plausible: dict[str, list[Any]] | None = None
    first: str | None = None
    known = _prior_scores(space, prior or {}, scores.objective.goal)
    if len(known) >= 2:
        # What earlier runs measured: start from their best config, and try on each axis only
        # the values within PRIOR_MARGIN of the best value there (values they never measured
        # are tried: nothing is known of them).
        baseline = dict(space.configs[max(sorted(known), key=lambda c: known[c])]["point"])
        plausible = _plausible_values(
            space, names, axes, known, PRIOR_MARGIN if prior_margin is None else prior_margin
        )
        first = space.launchable(baseline)
        if first is not None and first not in scores.results:
            yield first  # the likeliest winner first: the screens after it compare with it
    best_values: dict[str, Any] = {}
    # The distinct configs the budget allows: a third of the valid ones, or the one-axis pass
    # when it is longer (what planned_launches announces). A function of the plan and the
    # prior alone, so a resumed sweep counts the same.
    passed = set(one_axis_at_a_time(plan, Scoreboard(scores.objective), axes, baseline, only=plausible))
    allowed = max(cap, len(passed | ({first} if first is not None else set())))
    yield from one_axis_at_a_time(plan, scores, axes, baseline, best_values, only=plausible)
    start = space.start(axes, baseline)
    if start is not None and best_values:
        # The best value of each axis, combined (coordinate's last launch).
        combined = space.launchable({**start, **best_values})
        launched = sum(config_id in scores.results for config_id in space.valid)
        if combined is not None and combined not in scores.results and launched < max(cap, 1):
            yield combined
    while True:
        observations = []
        incumbent: float | None = None
        untested: list[str] = []
        for config_id in space.valid:
            if config_id not in scores.results:
                point = space.configs[config_id]["point"]
                if plausible is None or all(point[a] in plausible[a] for a in names):
                    untested.append(config_id)
                continue
            value = adaptive_score(scores, config_id)
            if value is None:
                continue
            levels = strategy_model.levels_of(space.configs[config_id]["point"], names)
            observations.append((levels, value))
            incumbent = value if incumbent is None else max(incumbent, value)
        if not untested:
            break
        # The budget counts every distinct config launched, failed ones included; it holds
        # once some config has run. Until then a working config is what the sweep needs
        # first, so the search goes on, each config at most once (the plan says so:
        # launches_while_nothing_runs).
        launched = sum(config_id in scores.results for config_id in space.valid)
        noise = launch_noise(scores) if error is None else error
        # A flat top: the finals' re-measures are spent on untested configs (they may hold a
        # peak), while the measured configs stay as alike as the noise makes them.
        spare = REMEASURES if _finals_buy_nothing(space, scores, noise) else 0
        if launched >= allowed + spare and incumbent is not None:
            break
        model = strategy_model.MainEffects(len(names), observations)
        one_error = max(math.log1p(noise), model.misfit())
        penalty = _failure_penalty(space, scores, names)
        # More than half of the launches failed: the failures are everywhere, a value's share
        # of them does not single it out (mostly-failing landscapes: every value then looked
        # likelier to fail than run and the search stopped short of the working configs), so
        # they only order the configs, least implicated first.
        lines = [scores.results[c] for c in space.valid if c in scores.results]
        everywhere = 2 * sum(line.get("status") != "ok" for line in lines) > len(lines)
        failures: dict[tuple[str, str], int] = {}
        for config_id in space.valid:
            line = scores.results.get(config_id)
            if line is not None and line.get("status") != "ok":
                point = space.configs[config_id]["point"]
                for key in zip(names, strategy_model.levels_of(point, names), strict=True):
                    failures[key] = failures.get(key, 0) + 1
        chosen: str | None = None
        # A value never measured in a launch that ran: nothing to predict with, so it comes
        # first, in the config its failures (if any) least suggest fails; once its failures
        # say a config more likely fails than runs (p >= 1/2 in all), that config is learned
        # from: not launched (it cannot win by failing).
        explore: tuple[float, str] | None = None
        predicted: list[tuple[str, Levels, float]] = []
        least_implicated: tuple[float, str] | None = None
        for config_id in untested:
            levels = strategy_model.levels_of(space.configs[config_id]["point"], names)
            risk = sum(penalty.get((names[n], level), 0.0) for n, level in enumerate(levels))
            if least_implicated is None or risk > least_implicated[0]:
                least_implicated = (risk, config_id)
            unknown = [n for n, level in enumerate(levels) if level not in model.effects[n]]
            if unknown:
                # one failure of a value may be its neighbour's fault: a second config tries it
                once = all(failures.get((names[n], levels[n]), 0) <= 1 for n in unknown)
                if (risk > math.log(0.5) or once or everywhere) and (explore is None or risk > explore[0]):
                    explore = (risk, config_id)
                continue
            predicted.append((config_id, levels, risk))
        if explore is not None:
            chosen = explore[1]
        elif incumbent is None and least_implicated is not None:
            # Nothing has run yet: the config the failures so far least implicate, in plan order.
            chosen = least_implicated[1]
        # The failure risk orders the candidates (a config its neighbours' crashes implicate
        # comes after one they do not), but never stops the search: what can still win is
        # read from the bound alone.
        floor = None if incumbent is None or model.dof < 0 else incumbent + math.log1p(noise)
        ranked_by: float | None = None
        for config_id, fill, risk in [] if explore is not None else predicted:
            prediction = model.predict(fill)
            if prediction is None:
                continue
            bound = prediction + z * one_error * model.spread(fill)
            if floor is not None and bound <= floor:
                continue
            if ranked_by is None or bound + risk > ranked_by:
                chosen, ranked_by = config_id, bound + risk
        if chosen is None:
            break
        # (An underdetermined model, a failed launch having left fewer scores than effects,
        # bounds nothing: ``floor`` is None and its best guess is launched.)
        yield chosen
    # Configs launched past the budget (a flat top's, or while nothing ran) took the finals'
    # re-measures: together they keep the announced budget. A function of how many distinct
    # configs the scoreboard holds, which the finals do not change: a resume decides the same.
    launched = sum(config_id in scores.results for config_id in space.valid)
    remeasures = REMEASURES - min(REMEASURES, max(0, launched - allowed))
    yield from finals(space.valid, scores, finalists, repeats, remeasures, margin)


def _chi2_upper(dof: int, z: float) -> float:
    """The upper quantile of a chi-square with ``dof`` degrees of freedom at ``z`` standard
    normal deviates (Wilson-Hilferty), divided by ``dof``: how far a variance estimated from
    ``dof`` degrees of freedom may exceed the true one by chance."""
    k = float(dof)
    return (1.0 - 2.0 / (9.0 * k) + z * math.sqrt(2.0 / (9.0 * k))) ** 3


def is_flat(values: list[float], noise: float) -> bool:
    """Whether log scores ``values`` of distinct configs differ no more than launches of one
    config do: their variance is within what the launch noise alone gives by chance
    (NOISE_Z deviates of a chi-square). Then nothing measured tells the configs apart."""
    if len(values) < 3:
        return False
    mean = math.fsum(values) / len(values)
    variance = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return variance <= math.log1p(noise) ** 2 * _chi2_upper(len(values) - 1, NOISE_Z)


def _finals_buy_nothing(space: Space, scores: Scoreboard, noise: float) -> bool:
    """Whether this run's measurements say the finals' re-measures are better spent on
    untested configs: the configs measured so far are as alike as the launch noise makes one
    config's launches (``is_flat``: a flat top). Re-measuring configs the data cannot tell
    apart ranks nothing that matters; a config not launched yet may be a peak."""
    values = [adaptive_score(scores, c) for c in space.valid if c in scores.results]
    return is_flat([v for v in values if v is not None], noise)


def _prior_scores(space: Space, prior: dict[str, float], goal: str) -> dict[str, float]:
    """config id -> log score of the prior's values for the configs this plan can launch."""
    return {
        config_id: strategy_model.score(float(value), goal)
        for config_id, value in prior.items()
        if config_id in space.valid_set and value is not None and float(value) > 0
    }


def _plausible_values(
    space: Space,
    names: list[str],
    axes: dict[str, list[Any]],
    known: dict[str, float],
    margin: float,
) -> dict[str, list[Any]]:
    """Per axis, the values a main-effects fit of the prior does not put more than
    ``margin`` behind the axis's best value, and the values the prior never measured."""
    observations = [
        (strategy_model.levels_of(space.configs[c]["point"], names), known[c]) for c in sorted(known)
    ]
    model = strategy_model.MainEffects(len(names), observations)
    plausible: dict[str, list[Any]] = {}
    for n, axis in enumerate(names):
        effects = model.effects[n]
        top = max(effects.values())
        plausible[axis] = [
            v for v in axes[axis] if repr(v) not in effects or effects[repr(v)] >= top - math.log1p(margin)
        ]
    return plausible
