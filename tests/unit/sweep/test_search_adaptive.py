"""The adaptive strategy: what it launches, when it stops, and that a resumed sweep decides the
same; its finals (re-measure the configs within the noise of the best, pick by pooled mean)
and its prior (earlier runs on the same hardware group), and how a re-measured config is
stored and ranked on both sides (node, results database, CLI)."""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import plan as make_real_plan
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies, strategy_model
from ansible_collections.bwtune.sglang.plugins.module_utils._search.strategies import (
    SCREEN,
    Objective,
    Scoreboard,
    run_order,
    screen_gate,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_runner import (
    BadInput,
    SweepOptions,
    prior_scores,
)
from bwtune import results_db
from bwtune.app import sweep_service

ROOT = Path(__file__).resolve().parents[3]
AXES = {"moe": ["a", "b", "c"], "gemm": ["x", "y", "z"], "attn": ["f", "t", "m"], "spec": ["none", "mtp"]}
# Separable: each value multiplies the speed; the best is (b, z, m, mtp), far from the baseline.
FACTOR = {"a": 1.0, "b": 1.3, "c": 0.7, "x": 1.0, "y": 0.9, "z": 1.1, "f": 1.0, "t": 0.6, "m": 1.05}
FACTOR.update({"none": 1.0, "mtp": 2.0})

Speed = Callable[[dict[str, Any]], float | None]


def make_plan(pruned: Callable[[dict[str, Any]], bool] = lambda p: False) -> dict[str, Any]:
    configs, launches = [], []
    for n, values in enumerate(itertools.product(*AXES.values())):
        point = dict(zip(AXES, values, strict=True))
        status = "pruned" if pruned(point) else "valid"
        configs.append({"id": f"c{n:010d}", "point": point, "status": status})
        if status == "valid":
            launches.append({"config": f"c{n:010d}", "workloads": [{"name": "single"}]})
    return {"configs": configs, "launches": launches}


def separable(point: dict[str, Any]) -> float | None:
    return 50.0 * math.prod(FACTOR[v] for v in point.values())


def noise(config_id: str, attempt: int = 0) -> float:
    """A fixed launch-to-launch factor per config and launch (within 1%), so a replay
    measures the same."""
    digest = hashlib.sha256(f"{config_id}/{attempt}".encode()).hexdigest()
    return 1.0 + (int(digest[:8], 16) / 0xFFFFFFFF - 0.5) / 50


def measure(plan: dict[str, Any], config_id: str, speed: Speed, attempt: int = 0) -> dict[str, Any]:
    """The line the sweep records for an adaptive launch: a screen of 3 repetitions, then the
    objective's workload (a failed config has no metrics). A re-measure (attempt > 0) runs
    the full workloads only, as the sweep does (strategies.needs_screen)."""
    point = next(c["point"] for c in plan["configs"] if c["id"] == config_id)
    value = speed(point)
    if value is None:
        return {"config_id": config_id, "host": "n1", "status": "crashed", "metrics": {}}
    value *= noise(config_id, attempt)
    screen = {"values": {"tok": value}, "ci95": {"tok": [value * 0.995, value * 1.005]}, "n": 3}
    metrics: dict[str, Any] = {"single": {"values": {"tok": value}, "n": 1}}
    if attempt == 0:
        metrics[SCREEN] = screen
    return {"config_id": config_id, "host": "n1", "status": "ok", "metrics": metrics}


def objective(goal: str = "max") -> Objective:
    return Objective("single", "tok", goal)


def drive(
    plan: dict[str, Any],
    speed: Speed,
    scores: Scoreboard | None = None,
    stop_after: int | None = None,
    prior: dict[str, float] | None = None,
) -> tuple[list[str], Scoreboard]:
    """Run adaptive like the node's sweep: launch, record, resume the generator. adaptive
    names only what it still needs (a re-measure names a measured config again), so the
    sweep launches every id it names (strategies.REMEASURING)."""
    scores = scores or Scoreboard(objective())
    launched: list[str] = []
    for config_id in run_order("adaptive", plan, scores, AXES, prior=prior):
        if stop_after is not None and len(launched) == stop_after:
            break  # the sweep is killed before this launch
        launched.append(config_id)
        scores.record(measure(plan, config_id, speed, scores.launches(config_id)))
    return launched, scores


def point_of(plan: dict[str, Any], config_id: str) -> dict[str, Any]:
    return next(c["point"] for c in plan["configs"] if c["id"] == config_id)


def true_best(plan: dict[str, Any], speed: Speed) -> dict[str, Any]:
    valid = [point_of(plan, launch["config"]) for launch in plan["launches"]]
    return max((p for p in valid if speed(p) is not None), key=lambda p: speed(p) or 0.0)


def test_a_separable_landscape_is_solved_with_a_fraction_of_the_launches() -> None:
    plan = make_plan()
    launched, scores = drive(plan, separable)
    # The runner-up is 4.8% behind: within the noise until re-measures measure it (finals).
    assert len(launched) - len(set(launched)) <= strategies.REMEASURES
    assert len(set(launched)) <= len(plan["launches"]) // 4  # 54 valid configs
    assert point_of(plan, scores.best() or "") == {"moe": "b", "gemm": "z", "attn": "m", "spec": "mtp"}


def test_an_interaction_the_model_misses_widens_the_search_until_it_is_found() -> None:
    """gemm z with attention m is 0.6x together: the one-axis-at-a-time pass sees two
    winners, the model predicts their combination best, and the measurement contradicts it.
    The model's misfit must widen the search to the true best instead of stopping there."""

    def interacting(point: dict[str, Any]) -> float | None:
        base = separable(point) or 0.0
        return base * (0.6 if (point["gemm"], point["attn"]) == ("z", "m") else 1.0)

    plan = make_plan()
    launched, scores = drive(plan, interacting)
    best = true_best(plan, interacting)
    assert (best["gemm"], best["attn"]) != ("z", "m")
    assert point_of(plan, scores.best() or "") == best
    assert len(launched) < len(plan["launches"]) // 2


@pytest.mark.parametrize("stop_after", [1, 4, 7, 8, 9])
def test_a_killed_sweep_resumes_to_the_same_decisions(stop_after: int) -> None:
    """Decisions are a function of the results file: kill after n launches, start a new
    generator on the recorded lines (as the sweep's resume does), and the launches that
    follow are the ones the uninterrupted sweep made."""

    def lumpy(point: dict[str, Any]) -> float | None:
        base = separable(point) or 0.0
        return base * (1.4 if (point["moe"], point["spec"]) == ("c", "mtp") else 1.0)

    plan = make_plan()
    whole, _ = drive(plan, lumpy)
    assert len(whole) > 9, "the kill points cover the one-axis pass and the model's launches"
    first, killed = drive(plan, lumpy, stop_after=stop_after)
    assert first == whole[:stop_after]
    lines = [line for history in killed.history.values() for line in history]
    random.Random(stop_after).shuffle(lines)  # the file's order (hosts, retries) must not matter
    # ... except between the launches of one config (the file keeps them in launch order).
    lines.sort(key=lambda line: SCREEN not in line["metrics"])
    resumed = Scoreboard(objective())
    for line in lines:
        resumed.record(line)
    rest, _ = drive(plan, lumpy, scores=resumed)
    assert first + rest == whole


def test_a_value_whose_launch_failed_is_tried_in_another_config() -> None:
    """The one-axis pass tries attention m once; it crashes there. Nothing is known about m,
    so another config with m is launched (here m is the best value)."""

    def m_crashes_at_baseline(point: dict[str, Any]) -> float | None:
        if point == {"moe": "a", "gemm": "x", "attn": "m", "spec": "none"}:
            return None
        return separable(point)

    plan = make_plan()
    launched, scores = drive(plan, m_crashes_at_baseline)
    tried_m = [c for c in launched if point_of(plan, c)["attn"] == "m"]
    assert len(tried_m) >= 2
    assert point_of(plan, scores.best() or "") == {"moe": "b", "gemm": "z", "attn": "m", "spec": "mtp"}


def test_pruned_points_are_never_launched_and_a_refused_baseline_is_replaced() -> None:
    plan = make_plan(pruned=lambda p: p["moe"] == "a" and p["gemm"] == "x")  # the baseline too
    launched, scores = drive(plan, separable)
    valid = {launch["config"] for launch in plan["launches"]}
    assert launched and set(launched) <= valid
    assert point_of(plan, scores.best() or "") == {"moe": "b", "gemm": "z", "attn": "m", "spec": "mtp"}


def test_when_every_launch_fails_each_config_is_tried_once_as_announced_and_nothing_wins() -> None:
    """While every launch fails the search goes on until a config runs (a working config is
    what the sweep needs first), each config at most once: what `bwtune plan` announces for
    that case (launches_while_nothing_runs), and nothing wins."""
    plan = make_plan()
    launched, scores = drive(plan, lambda point: None)
    assert len(launched) == len(set(launched))
    assert len(launched) <= strategies.launches_while_nothing_runs(plan)
    assert len(launched) > strategies.planned_launches(plan, AXES)["adaptive"][1]
    assert scores.best() is None


def test_the_one_config_that_runs_is_found_past_the_budget_and_the_search_stops_there() -> None:
    """Issue 24's mostly-failing landscapes: with the budget holding while nothing ran, the
    search stopped before any config ran and named no winner."""
    plan = make_plan()
    working = {"moe": "c", "gemm": "z", "attn": "t", "spec": "mtp"}
    launched, scores = drive(plan, lambda point: 80.0 if point == working else None)
    assert point_of(plan, scores.best() or "") == working
    first_ok = next(i for i, c in enumerate(launched) if point_of(plan, c) == working)
    # once a config ran the budget holds again: only the finals may follow
    assert len(launched) - (first_ok + 1) <= strategies.REMEASURES


def test_a_crashing_value_is_learned_from_not_re_probed() -> None:
    """attn t crashes every config; once its launches have failed, the search does not treat
    it as unmeasured: at most a second config with it is launched, and the best is found."""
    plan = make_plan()
    launched, scores = drive(plan, lambda p: None if p["attn"] == "t" else separable(p))
    with_t = [c for c in set(launched) if point_of(plan, c)["attn"] == "t"]
    assert 1 <= len(with_t) <= 2
    assert point_of(plan, scores.best() or "") == {"moe": "b", "gemm": "z", "attn": "m", "spec": "mtp"}


def test_goal_min_searches_for_the_smallest_value() -> None:
    def latency(point: dict[str, Any]) -> float | None:
        return 1000.0 / (separable(point) or 1.0)

    plan = make_plan()
    scores = Scoreboard(objective("min"))
    launched, scores = drive(plan, latency, scores=scores)
    assert point_of(plan, scores.best() or "") == {"moe": "b", "gemm": "z", "attn": "m", "spec": "mtp"}
    assert len(launched) < len(plan["launches"]) // 2


def test_screen_gate_compares_with_the_best_screen_recorded_resumed_lines_included() -> None:
    scores = Scoreboard(objective())
    probe = {"values": {"tok": 55.0}, "ci95": {"tok": [50.0, 60.0]}}
    assert screen_gate(scores, probe), "the first screen always earns the full workloads"
    scores.record(
        {
            "config_id": "c1",
            "host": "n1",
            "status": "ok",
            "screened_out": True,
            "metrics": {SCREEN: {"values": {"tok": 105.0}, "ci95": {"tok": [100.0, 110.0]}}},
        }
    )
    assert not screen_gate(scores, probe), "wholly below the recorded best"
    assert screen_gate(scores, {"values": {"tok": 99.0}, "ci95": {"tok": [95.0, 101.0]}})


def test_main_effects_fit_recovers_an_additive_landscape_and_says_what_it_cannot_predict() -> None:
    effects = [{"a": 0.0, "b": 0.5}, {"x": 0.0, "y": -0.2, "z": 0.1}]
    observations = [
        ((a, b), 1.0 + effects[0][a] + effects[1][b])
        for a, b in [("a", "x"), ("b", "x"), ("a", "y"), ("a", "z")]
    ]
    model = strategy_model.MainEffects(2, observations)
    assert model.dof == 0 and model.misfit() == 0.0
    assert model.predict(("b", "z")) == pytest.approx(1.6)
    assert model.predict(("c", "z")) is None
    # b was measured once, a three times: a prediction with b is less certain.
    assert model.spread(("b", "x")) > model.spread(("a", "x"))
    noisy = [*observations, (("b", "z"), 1.9)]
    assert strategy_model.MainEffects(2, noisy).misfit() > 0.1


def test_a_flat_landscape_stops_once_nothing_can_win_by_more_than_the_noise() -> None:
    """No axis matters (every config within 1% of another): proving that must not cost the
    grid. (Stopping only when no bound reaches the best at all launches all 54 here.)"""
    plan = make_plan()
    launched, scores = drive(plan, lambda point: 50.0)
    assert len(launched) <= len(plan["launches"]) * 2 // 3
    assert scores.best() in launched


def test_the_launch_budget_bounds_the_model_guided_launches() -> None:
    """On a flat landscape every bound stays above the best: the budget (a share of the valid
    configs) is what stops the search; the top is flat, so the finals' re-measures went to
    untested configs (test_search_flat_top.py) and the launches in all keep the budget."""
    plan = make_plan()
    valid = len(plan["launches"])
    for budget in (0.25, 0.5):
        scores = Scoreboard(objective())
        launched: list[str] = []
        for config_id in strategies.adaptive(plan, scores, AXES, budget=budget, finalists=0):
            launched.append(config_id)
            scores.record(measure(plan, config_id, lambda point: 50.0, scores.launches(config_id)))
        assert len(set(launched)) == math.ceil(budget * valid) + strategies.REMEASURES, budget
    default, _scores = drive(plan, lambda point: 50.0)
    cap = math.ceil(strategies.ADAPTIVE_BUDGET * valid)
    assert len(set(default)) == cap + strategies.REMEASURES
    assert (
        len(default) <= cap + strategies.REMEASURES == strategies.planned_launches(plan, AXES)["adaptive"][1]
    )


BEST = {"moe": "b", "gemm": "z", "attn": "m", "spec": "mtp"}
RIVAL = {"moe": "b", "gemm": "z", "attn": "f", "spec": "mtp"}


def near_tie(point: dict[str, Any]) -> float | None:
    """Attention f is within 0.5% of m (the best): one launch each cannot tell them apart."""
    base = separable(point) or 0.0
    return base * (1.045 if point["attn"] == "f" else 1.0)


def test_the_configs_within_the_noise_of_the_best_are_measured_again_and_ranked_by_pooled_mean() -> None:
    plan = make_plan()
    launched, scores = drive(plan, near_tie)
    repeated = sorted({c for c in launched if launched.count(c) > 1})
    assert {tuple(point_of(plan, c).items()) for c in repeated} >= {
        tuple(BEST.items()),
        tuple(RIVAL.items()),
    }
    assert all(2 <= launched.count(c) <= strategies.REPEATS for c in repeated)
    assert len(launched) - len(set(launched)) <= strategies.REMEASURES
    assert launched[-2:] == [c for c in launched[-2:] if c in repeated], "the finals come last"
    # The winner is the best pooled mean, not the best single launch.
    pooled = {c: scores.pooled(c) or 0.0 for c in repeated}
    assert scores.best() == max(pooled, key=lambda c: pooled[c])
    # Each re-measure ran the full workloads only: no second screen.
    assert all(SCREEN not in line["metrics"] for c in repeated for line in scores.history[c][1:])


def test_no_finals_when_nothing_is_within_the_noise_of_the_best() -> None:
    # attention m 1.25x: every runner-up is 10% or more behind, beyond the noise.
    def clear(point: dict[str, Any]) -> float | None:
        return (separable(point) or 0.0) * (1.25 / 1.05 if point["attn"] == "m" else 1.0)

    launched, _scores = drive(make_plan(), clear)
    assert len(launched) == len(set(launched))


def test_a_sweep_killed_in_its_finals_resumes_to_the_same_launches() -> None:
    plan = make_plan()
    whole, _ = drive(plan, near_tie)
    for stop_after in range(len(whole) - 3, len(whole)):
        first, killed = drive(plan, near_tie, stop_after=stop_after)
        assert first == whole[:stop_after]
        lines = [line for history in killed.history.values() for line in history]
        random.Random(stop_after).shuffle(lines)
        lines.sort(key=lambda line: SCREEN not in line["metrics"])  # a config's launches in order
        resumed = Scoreboard(objective())
        for line in lines:
            resumed.record(line)
        rest, _ = drive(plan, near_tie, scores=resumed)
        assert first + rest == whole, f"killed after {stop_after} launches"


def test_a_sweep_killed_at_its_launch_budget_resumes_to_the_same_launches() -> None:
    """The budget counts the configs the results file holds: a resume stops where the
    uninterrupted sweep stopped."""
    plan = make_plan()
    whole, _ = drive(plan, lambda point: 50.0)
    budget = math.ceil(strategies.ADAPTIVE_BUDGET * len(plan["launches"]))
    for stop_after in range(budget - 2, budget + 1):
        first, killed = drive(plan, lambda point: 50.0, stop_after=stop_after)
        lines = [line for history in killed.history.values() for line in history]
        random.Random(stop_after).shuffle(lines)
        resumed = Scoreboard(objective())
        for line in lines:
            resumed.record(line)
        rest, _ = drive(plan, lambda point: 50.0, scores=resumed)
        assert first + rest == whole, f"killed after {stop_after} launches"


def test_pick_best_pools_the_launches_of_one_config_on_one_stack() -> None:
    obj = {"workload": "single", "metric": "tok", "goal": "max"}

    def line(config_id: str, value: float, finished: str, stack: str = "s1") -> dict[str, Any]:
        metrics = {"single": {"values": {"tok": value}}}
        return {"config_id": config_id, "host": "n1", "status": "ok", "metrics": metrics,
                "stack_fingerprint": stack, "finished_at": finished}  # fmt: skip

    lucky, again, steady = line("ca", 100.0, "t1"), line("ca", 90.0, "t3"), line("cb", 96.0, "t2")
    assert results_contract.pick_best([lucky, steady], obj) is lucky
    assert results_contract.pick_best([lucky, steady, again], obj) is steady, "ca pools to 95"
    assert results_contract.pick_best([steady, again, lucky], obj) is steady, "order does not matter"
    # The latest launch stands for a config that wins on its pooled mean.
    assert results_contract.pick_best([lucky, line("ca", 98.0, "t4")], obj)["finished_at"] == "t4"
    # Another stack is another measurement: not pooled.
    assert results_contract.pick_best([lucky, steady, line("ca", 90.0, "t3", "s2")], obj) is lucky
    # A re-measure that crashed: the config is not safe to serve, whatever it measured before.
    crashed = {**line("ca", 0.0, "t5"), "status": results_contract.CRASHED, "metrics": {}}
    assert results_contract.pick_best([lucky, steady, crashed], obj) is steady
    assert results_contract.pick_best([crashed, lucky], obj) is None
    # A failure before an ok launch (a resumed sweep launched it again) does not count.
    earlier = {**crashed, "finished_at": "t0"}
    assert results_contract.pick_best([lucky, steady, earlier], obj) is lucky


def _line(sample: dict[str, Any], value: float, finished: str) -> dict[str, Any]:
    metrics = {"single": {"n": 1, "values": {"output_tok_s_per_request": value}}}
    return results_contract.make_line(**{**sample, "metrics": metrics, "finished_at": finished})


SAMPLE = {"run_id": "r1", "host": "n1", "config_id": "c0000000001", "status": "ok", "flags": {},
          "stack_fingerprint": "fp1", "gpu": "sm120"}  # fmt: skip


def test_a_results_file_with_a_re_measure_imports_once_and_ranks_by_pooled_mean(tmp_path: Path) -> None:
    conn = results_db.connect(tmp_path / "r.db")
    first, again = _line(SAMPLE, 100.0, "2026-11-30T10:00:00"), _line(SAMPLE, 90.0, "2026-11-30T11:00:00")
    other = _line({**SAMPLE, "config_id": "c0000000002"}, 96.0, "2026-11-30T10:30:00")
    objective = {"workload": "single", "metric": "output_tok_s_per_request", "goal": "max"}
    results_db.record_run(conn, "r1", matrix={"objective": objective})
    summary = results_db.import_results(conn, [first, other, again])
    assert (summary.added, len(summary.replaced)) == (2, 1)
    # Reading the same file again changes nothing: no swap between the two launches.
    again_summary = results_db.import_results(conn, [first, other, again])
    assert (again_summary.added, len(again_summary.replaced), again_summary.unchanged) == (0, 0, 3)
    assert len(results_db.superseded_results(conn, "r1")) == 1
    assert results_db.build_run_output(conn, "r1")["best"]["id"] == "c0000000002", "c...1 pools to 95"


@pytest.mark.parametrize(
    ("prior", "message"),
    [
        ("fast", "prior: expected a list"),
        ([{"score": 1.0}], "prior[0]: names no config"),
        (
            [{"config": "c1", "score": 1.0}, {"config": "c2", "score": -3}],
            "prior[1].score: expected a positive",
        ),
        ([{"config": "c1", "score": True}], "prior[0].score"),
        ([{"flags": "tp 8", "score": 1.0}], "prior[0].flags: expected a mapping"),
    ],
)
def test_a_bad_prior_is_one_line_naming_the_entry(prior: Any, message: str, tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=message.replace("[", r"\[").replace("]", r"\]")):
        SweepOptions(matrix={"axes": {}}, results_path=str(tmp_path / "r1" / "results.jsonl"), prior=prior)


def test_prior_entries_match_this_plans_configs_by_id_or_flags() -> None:
    the_plan = {"configs": [{"id": "c1", "flags": {"a": 1}}, {"id": "c2", "flags": {"a": 2}}]}
    prior = [
        {"config": "c1", "flags": None, "score": 5.0},
        {"config": None, "flags": {"a": 2}, "score": 7.0},
        {"config": "c9", "flags": None, "score": 9.0},  # not in this plan: ignored
    ]
    assert prior_scores(prior, the_plan) == {"c1": 5.0, "c2": 7.0}


def test_a_prior_starts_from_its_best_and_skips_values_it_puts_far_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = make_plan()
    cold, cold_scores = drive(plan, separable)
    prior = {c: cold_scores.pooled(c) or cold_scores.pooled(c, SCREEN) or 0.0 for c in cold_scores.history}
    again, scores = drive(plan, separable, prior=prior)
    assert point_of(plan, again[0]) == BEST, "the prior's best is launched first"
    assert point_of(plan, scores.best() or "") == BEST
    assert len(again) < len(cold)
    # Relative to the best value of its axis: attention t is 0.57x (m), moe c 0.54x (b): more
    # than 1.5x slower, skipped at the default margin (50%); gemm y is 0.82x (z): tried. At a
    # 10% margin y is skipped too, attention f (0.95x) still tried.
    assert not any(point_of(plan, c)["attn"] == "t" or point_of(plan, c)["moe"] == "c" for c in again)
    assert any(point_of(plan, c)["gemm"] == "y" for c in again)
    monkeypatch.setattr(strategies, "PRIOR_MARGIN", 0.1)
    strict, scores = drive(plan, separable, prior=prior)
    assert not any(point_of(plan, c)["gemm"] == "y" for c in strict)
    assert any(point_of(plan, c)["attn"] == "f" for c in strict)
    assert point_of(plan, scores.best() or "") == BEST


def test_a_prior_that_drifted_still_finds_the_new_best() -> None:
    """Since the earlier run, moe a got 1.5x faster (a new backend release): the prior's best
    is no longer the best, and the search must leave it."""
    plan = make_plan()
    _cold, cold_scores = drive(plan, separable)
    prior = {c: cold_scores.pooled(c) or cold_scores.pooled(c, SCREEN) or 0.0 for c in cold_scores.history}

    def drifted(point: dict[str, Any]) -> float | None:
        return (separable(point) or 0.0) * (1.5 if point["moe"] == "a" else 1.0)

    _again, scores = drive(plan, drifted, prior=prior)
    assert point_of(plan, scores.best() or "") == {**BEST, "moe": "a"}


def test_bwtune_sweep_reads_the_prior_of_earlier_runs_on_the_hardware_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BWTUNE_DB", str(tmp_path / "results.db"))
    matrix = yaml.safe_load((ROOT / "examples" / "qwen35-397b-nvfp4-sm120.yml").read_text())
    ids = [launch["config"] for launch in make_real_plan(matrix, gpu="sm120").to_dict()["launches"]]
    inventory = type("Inventory", (), {"hosts": ["n1"], "hostvars": {"n1": {}}})()
    request = sweep_service.SweepRequest(
        inventory=inventory, matrix=matrix, matrix_source="m.yml", run_id="r3", strategy="adaptive"
    )  # type: ignore[arg-type]
    assert sweep_service.read_prior(request) == [], "no database yet: no prior"
    conn = results_db.connect()

    def line(run: str, config_id: str, value: float, **extra: Any) -> dict[str, Any]:
        fields = {**SAMPLE, "run_id": run, "config_id": config_id, "gpu": "sm120", **extra}
        return _line(fields, value, f"2026-11-30T1{run[-1]}:00:00")

    results_db.import_results(conn, [line("r1", ids[0], 10.0), line("r1", ids[1], 20.0)])
    results_db.import_results(conn, [line("r2", ids[0], 30.0)])
    results_db.import_results(conn, [line("r2", ids[1], 99.0, gpu="sm90")])  # another group
    results_db.import_results(conn, [line("r2", "c9999999999", 99.0)])  # not in this plan
    results_db.import_results(conn, [line("r9", ids[1], 77.0, simulated=True)])  # the stand-in
    conn.close()
    prior = sweep_service.read_prior(request)
    assert prior == sorted(
        [{"config": ids[0], "score": 30.0}, {"config": ids[1], "score": 20.0}], key=lambda e: e["config"]
    ), "the latest run's value per config, this group's real lines only"
    assert request.extravars().get("sweep_prior") is None, "set by run_sweep"
    request.prior = prior
    assert request.extravars()["sweep_prior"] == prior
    grid = sweep_service.SweepRequest(
        inventory=inventory, matrix=matrix, matrix_source="m.yml", run_id="r3", strategy="grid"
    )  # type: ignore[arg-type]
    assert sweep_service.read_prior(grid) == [], "only adaptive reads a prior"
    default = sweep_service.SweepRequest(
        inventory=inventory, matrix=matrix, matrix_source="m.yml", run_id="r3"
    )  # type: ignore[arg-type]
    assert sweep_service.read_prior(default) == prior, "adaptive is the default strategy"
