"""How well `bwtune regress` tells a slower stack from noise, on the stand-in's performance model.

No server runs and nothing waits: each launch's numbers are drawn from the stand-in's own
model (src/bwtune/standin): the config's throughput from `predict_output_throughput` on
the shipped RTX PRO 6000 profile, a launch factor ~ N(1, noise.cv) shared by the launch's
repetitions (the profile's launch-to-launch spread, 2%), and each repetition's own jitter,
the profile's step jitter (5%) averaged over the repetition's decode steps. The verdicts
come from the real code: `bwtune.regression.compare`, `change_points`, and (for the
backend case) `bwtune.regression_history.analyze` over a results database.

    .venv/bin/python benchmarks/regression_power.py [--trials 200] [--seed 1]

Prints Markdown: the 7% backend case with its attribution, the 2%/night drift, false alarms
over 50 same-profile comparisons, and the smallest slowdown detected in >= 95% of trials by
repetitions (launches per config).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "regression"))

from history_lines import OBJECTIVE, line, stack

from bwtune import regression, regression_history, store
from bwtune.standin.batch import predict_output_throughput
from bwtune.standin.performance import ConfigPerformance
from bwtune.standin.profile import Adjustment, Match, Profile, load_profile

WORKLOAD = {"concurrency": 8, "input_len": 1024, "output_len": 256, "num_prompts": 32}
REPETITIONS_PER_LAUNCH = 3
PROD = {"tp-size": 8, "moe-runner-backend": "flashinfer_cutlass", "fp4-gemm-backend": "flashinfer_cutlass"}
ALT = {"tp-size": 8, "moe-runner-backend": "triton", "fp4-gemm-backend": "flashinfer_cutlass"}


def throughput(profile: Profile, flags: dict) -> float:
    perf = ConfigPerformance.for_flags(profile, flags)
    return predict_output_throughput(perf, WORKLOAD["concurrency"], WORKLOAD["input_len"],
                                     WORKLOAD["output_len"], WORKLOAD["num_prompts"])  # fmt: skip


def repetition_cv(profile: Profile) -> float:
    """Step jitter averaged over one repetition's decode steps."""
    steps = WORKLOAD["num_prompts"] * WORKLOAD["output_len"] / WORKLOAD["concurrency"]
    return profile.step_jitter_cv / math.sqrt(steps)


def draw_run(level: float, profile: Profile, launches: int, rng: random.Random) -> list[list[float]]:
    rep_cv = repetition_cv(profile)
    out = []
    for _ in range(launches):
        factor = max(0.5, rng.gauss(1.0, profile.cv))  # as the stand-in's BatchSimulator draws it
        out.append([level / factor * rng.gauss(1.0, rep_cv) for _ in range(REPETITIONS_PER_LAUNCH)])
    return out


def slowed(profile: Profile, backend: str, factor: float) -> Profile:
    """The profile with one MoE backend's decode step `factor` times longer."""
    extra = Adjustment(Match({"moe-runner-backend": backend}), factor, 1.0, f"benchmark: {backend} slower")
    return dataclasses.replace(profile, adjustments=[*profile.adjustments, extra])


def verdict(reference: list[list[float]], candidate: list[list[float]], settings: regression.Settings) -> str:
    return regression.compare(
        reference, candidate, metric="output_throughput", goal="max", settings=settings
    ).verdict


# --------------------------------------------------------------------------- experiments


def backend_case(profile: Profile, launches: int, seed: int) -> list[str]:
    """Five quiet nights, then FlashInfer changes and its cutlass MoE decode is 7% slower."""
    slow = slowed(profile, "flashinfer_cutlass", 1.07)
    levels = {"cprod000001": throughput(profile, PROD), "calt0000002": throughput(profile, ALT)}
    slow_levels = {"cprod000001": throughput(slow, PROD), "calt0000002": throughput(slow, ALT)}
    conn = store.connect(":memory:")
    rng = random.Random(seed)
    for day in range(1, 6):
        _store(conn, f"night-{day}", day, levels, profile, launches, rng, stack())
    _store(conn, "night-6", 6, slow_levels, profile, launches, rng, stack(flashinfer="0.5.4"))
    report = regression_history.analyze(conn, "night-6")
    lines = ["| config | MoE backend | model change | verdict | measured change | p | attributed to |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for config in report.configs:
        main = next(v for v in config.workloads[0].verdicts if v.metric == "output_throughput")
        model = slow_levels[config.config_id] / levels[config.config_id] - 1
        backend = (
            PROD["moe-runner-backend"] if config.config_id == "cprod000001" else ALT["moe-runner-backend"]
        )
        lines.append(
            f"| {config.config_id} | {backend} | {model * 100:+.1f}% | {config.verdict} | "
            f"{(main.change or 0) * 100:+.1f}% | {main.p_value:.2g} | "
            f"{regression.attribution_text(config.attribution) if config.attribution else '-'} |"
        )
    conn.close()
    return lines


def _store(conn, run_id, day, levels, profile, launches, rng, components) -> None:  # type: ignore[no-untyped-def]
    """A regression run as `bwtune regress` stores it: each launch a results line (later
    launches supersede earlier ones), the values from the noise model."""
    store.record_run(conn, run_id, objective=OBJECTIVE, created_at=f"2026-11-{day:02d}T02:00:00+00:00")
    for config_id, level in levels.items():
        for number, values in enumerate(draw_run(level, profile, launches, rng)):
            record = line(run_id, config_id, day, values, stack_components=components)
            record["finished_at"] = f"2026-11-{day:02d}T02:{number:02d}:00+00:00"
            store.import_results(conn, [record])
    store.tag_run(conn, run_id, "regression")


def drift_case(profile: Profile, launches: int, trials: int, seed: int) -> dict[str, float]:
    """Ten quiet nights, then 2% slower each night for five nights."""
    base = throughput(profile, PROD)
    levels = [base] * 10 + [base * (1 - 0.02 * k) for k in range(1, 6)]
    settings = regression.Settings()
    caught = single = located = steps_flagged = 0
    for trial in range(trials):
        rng = random.Random(seed * 1000 + trial)
        nights = [draw_run(level, profile, launches, rng) for level in levels]
        drift_steps = list(itertools.pairwise(nights))[-5:]
        flagged = sum(verdict(a, b, settings) == regression.REGRESSION for a, b in drift_steps)
        steps_flagged += flagged
        single += flagged > 0
        points = [
            regression.HistoryPoint(f"n{i}", str(i), statistics.median(v for launch in night for v in launch))
            for i, night in enumerate(nights)
        ]
        found = regression.change_points(points, "max", settings)
        worse = [cp for cp in found if cp.verdict == regression.REGRESSION]
        if worse:
            caught += 1
            located += 10 <= worse[-1].index <= 14
    return {
        "change_point": caught / trials,
        "in_drift": located / trials,
        "single": single / trials,
        "per_step": steps_flagged / (5 * trials),
    }


def false_alarms(profile: Profile, launches: int, comparisons: int, seed: int) -> dict[str, int]:
    level = throughput(profile, PROD)
    settings = regression.Settings()
    counts = dict.fromkeys(regression.VERDICTS, 0)
    rng = random.Random(seed)
    for _ in range(comparisons):
        reference, candidate = (
            draw_run(level, profile, launches, rng),
            draw_run(level, profile, launches, rng),
        )
        counts[verdict(reference, candidate, settings)] += 1
    return counts


def detection_rate(
    profile: Profile, launches: int, slowdown: float, trials: int, rng: random.Random
) -> float:
    level = throughput(profile, PROD)
    settings = regression.Settings()
    hits = 0
    for _ in range(trials):
        reference = draw_run(level, profile, launches, rng)
        candidate = draw_run(level * (1 - slowdown), profile, launches, rng)
        hits += verdict(reference, candidate, settings) == regression.REGRESSION
    return hits / trials


def smallest_detected(
    profile: Profile, launches: int, trials: int, seed: int, steps: Sequence[float]
) -> float | None:
    rng = random.Random(seed)
    for slowdown in steps:
        if detection_rate(profile, launches, slowdown, trials, rng) >= 0.95:
            return slowdown
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.monotonic()
    profile = load_profile()
    launches = 8  # bwtune regress's default --repetitions
    print(f"Profile {profile.name}: launch cv {profile.cv:.1%}, step jitter {profile.step_jitter_cv:.1%} "
          f"(per repetition {repetition_cv(profile):.2%}); {REPETITIONS_PER_LAUNCH} repetitions per launch; "
          f"default {launches} launches per config; min effect 3%.\n")  # fmt: skip
    print("### One backend's decode 7% slower (FlashInfer 0.5.3 -> 0.5.4), five quiet nights before\n")
    print("\n".join(backend_case(profile, launches, args.seed)) + "\n")
    drift = drift_case(profile, launches, 50, args.seed)
    print("### 2%/night drift over five nightlies (after ten quiet nights), 50 histories\n")
    print(
        f"- caught by a change point (E-divisive means, level moved >= 3% the wrong way): "
        f"{drift['change_point']:.0%} of histories "
        f"(the change point inside the drift: {drift['in_drift']:.0%})"
    )
    print(
        f"- each drift night against the night before (a 2% step, under the 3% minimum effect): flagged in "
        f"{drift['per_step']:.0%} of those comparisons (noise pushing a step over 3%); at least one of the "
        f"five flagged in {drift['single']:.0%} of histories\n"
    )
    fa = false_alarms(profile, launches, 50, args.seed)
    counts = ", ".join(f"{name}: {count}" for name, count in fa.items())
    print("### The same profile twice, 50 comparisons\n")
    print(f"- {counts} (false alarms: {fa['regression']}/50)\n")
    steps = [s / 1000 for s in range(20, 161, 5)]
    print(
        f"### Smallest slowdown detected in >= 95% of {args.trials} trials, "
        "and false alarms, by repetitions\n"
    )
    print(
        "| repetitions (launches per config) | smallest slowdown detected in >= 95% | false alarms / 1000 |"
    )
    print("|---|---|---|")
    for n in (1, 2, 3, 4, 6, 8, 12, 16):
        smallest = smallest_detected(profile, n, args.trials, args.seed + n, steps)
        alarms = false_alarms(profile, n, 1000, args.seed + 100 + n)["regression"]
        shown = "none up to 16%" if smallest is None else f"{smallest:.1%}"
        print(f"| {n}{' (default)' if n == launches else ''} | {shown} | {alarms} |")
    print(f"\n(took {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
