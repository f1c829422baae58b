"""Verifying a recipe: its one config launched again as a scratch sweep, compared with the
numbers it records by the regression statistics (bwtune.regression.compare), and an
attestation that puts both side by side.

The sweep itself is `bwtune sweep`'s (the command runs it: a one-config matrix from
`matrix_of`, strategy grid, N launches as `bwtune regress` repeats them); this module builds
the matrix, reads the new launches back from the store and gives the verdict.
"""

from __future__ import annotations

import sqlite3
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import regression, store
from bwtune.recipes import check, recipe_file

TAG = "recipe-verify"
REPRODUCED, SLOWER, FASTER, COULD_NOT_RUN, INCONCLUSIVE = (
    "reproduced", "slower", "faster", "could not run", "inconclusive",
)  # fmt: skip


@dataclass
class Outcome:
    verdict: str
    line: str  # "reproduced", "slower by 12.3% (p=0.004)", "could not run (oom: ...)"
    run_id: str
    config_id: str | None = None
    change: float | None = None
    p_value: float | None = None
    reference: list[list[float]] = field(default_factory=list)
    candidate: list[list[float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    note: str = ""
    # The recipe's stack inputs the verifying launches ran with other values of: {"name",
    # "words", "recipe", "host"} each (the scratch run's results lines' `stack`).
    differ: list[dict[str, Any]] = field(default_factory=list)


def matrix_of(recipe: Mapping[str, Any], model_path: str | None = None) -> dict[str, Any]:
    """A sweep matrix of the recipe's one config: its flags as the base, no axes."""
    flags = argv_flags(recipe["launch"])
    if any(v == recipe_file.REDACTED for v in flags.values()):
        raise recipe_file.RecipeError(
            "the recipe's flags hold a redacted secret: give it with -e, not from the recipe"
        )
    path = model_path or (recipe.get("checkpoint") or {}).get("path")
    if not path:
        raise recipe_file.RecipeError("the recipe records no checkpoint path: give one with --model-path")
    hardware = recipe.get("hardware") or {}
    matrix: dict[str, Any] = {"model": {"path": path}, "hardware": {"gpu": hardware.get("gpu")}}
    if hardware.get("count"):
        matrix["hardware"]["count"] = hardware["count"]
    version = (recipe.get("stack") or {}).get("sglang_version")
    if version:
        matrix["sglang"] = {"version": version}
    matrix["base"] = flags
    matrix["axes"] = {}
    matrix["workloads"] = [dict(w) for w in recipe.get("workloads") or []]
    matrix["objective"] = dict(recipe["objective"])
    return matrix


def argv_flags(launch: Mapping[str, Any]) -> dict[str, Any]:
    """The flags the recipe's argv passes (`--model-path` aside), with the recorded flags'
    values (their types): the argv, not the plan's resolved flags, is what was launched (a
    flag SGLang sets itself is in `flags` but was never passed)."""
    recorded = launch.get("flags") or {}
    argv = [str(word) for word in launch.get("argv") or []]
    found: dict[str, Any] = {}
    n = 0
    while n < len(argv):
        word = argv[n]
        n += 1
        if not word.startswith("--"):
            continue
        name, eq, value = word[2:].partition("=")
        if not eq:
            if n < len(argv) and not argv[n].startswith("--"):
                value, n = argv[n], n + 1
            else:
                value = True  # type: ignore[assignment]
        found[name] = recorded.get(name, value)
    found.pop("model-path", None)
    return found


def reference_launches(recipe: Mapping[str, Any]) -> list[list[float]]:
    return [
        [float(v) for v in launch.get("values") or []]
        for launch in (recipe.get("results") or {}).get("launches") or []
        if launch.get("status") == contract.OK and launch.get("values")
    ]


def _lines(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    lines = [*store.superseded_results(conn, run_id), *store.run_results(conn, run_id)]
    return [line for line in lines if contract.is_launched(line.get("status"))]


def judge(
    conn: sqlite3.Connection,
    recipe: Mapping[str, Any],
    run_id: str,
    settings: regression.Settings = regression.DEFAULT_SETTINGS,
) -> Outcome:
    """The verdict of run `run_id` (the scratch sweep) against the recipe's numbers."""
    objective = recipe["objective"]
    lines = _lines(conn, run_id)
    reference = reference_launches(recipe)
    config_ids = sorted({str(line.get("config_id")) for line in lines})
    config_id = config_ids[0] if len(config_ids) == 1 else None
    failures = [
        f"{line.get('status')}: {contract_message(line)}"
        for line in lines
        if line.get("status") != contract.OK
    ]
    candidate = [v for v in (regression.objective_repetitions(line, objective) for line in lines
                             if line.get("status") == contract.OK) if v]  # fmt: skip
    outcome = Outcome(COULD_NOT_RUN, "", run_id, config_id, reference=reference, candidate=candidate,
                      failures=failures)  # fmt: skip
    stacks = [line["stack"] for line in lines if isinstance(line.get("stack"), Mapping)]
    if stacks:
        outcome.differ = check.component_differences(recipe, stacks[-1])
    if not lines:
        outcome.line = "could not run (no launch: the sweep launched nothing)"
        return outcome
    if not candidate:
        outcome.line = f"could not run ({failures[0] if failures else 'no value of the objective measured'})"
        return outcome
    wanted = (recipe.get("measured") or {}).get("config_id")
    if config_id != wanted:
        outcome.note = f"the scratch sweep's config id {config_id} is not the recipe's {wanted}"
    goal = regression.goal_of(str(objective["metric"]), objective)
    verdict = regression.compare(
        reference, candidate, metric=str(objective["metric"]), goal=goal, settings=settings
    )
    outcome.change, outcome.p_value = verdict.change, verdict.p_value
    p_text = f" (p={verdict.p_value:.3g})" if verdict.p_value is not None else ""
    pct = f"{abs(verdict.change or 0.0) * 100:.1f}%"
    if verdict.verdict == regression.REGRESSION:
        outcome.verdict, outcome.line = SLOWER, f"slower by {pct}{p_text}"
    elif verdict.verdict == regression.IMPROVEMENT:
        outcome.verdict, outcome.line = FASTER, f"faster by {pct}{p_text}"
    elif verdict.verdict == regression.NO_CHANGE:
        # A change the test finds but the launch noise cannot confirm ("-21.9% is within the
        # noise") is inconclusive, not reproduced: the numbers moved and more launches decide.
        outcome.verdict = REPRODUCED
        p_part = f", p={verdict.p_value:.3g}" if verdict.p_value is not None else ""
        outcome.line = f"reproduced ({(verdict.change or 0.0) * 100:+.1f}%{p_part}: within the noise)"
    else:
        outcome.verdict, outcome.line = INCONCLUSIVE, f"inconclusive ({verdict.note})"
    if failures:
        outcome.note = "; ".join(
            filter(None, [outcome.note, f"{len(failures)} launch(es) failed: {failures[0]}"])
        )
    return outcome


def contract_message(line: Mapping[str, Any]) -> str:
    found = line.get("failure")
    failure: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    return str(failure.get("message") or "no message").splitlines()[0][:200]


def _summary(launches: Sequence[Sequence[float]]) -> str:
    values = [v for launch in launches for v in launch]
    if not values:
        return "-"
    mean, ci95, _cv = contract.mean_ci95([statistics.fmean(launch) for launch in launches if launch])
    interval = f" (95% CI {ci95[0]:.4g} .. {ci95[1]:.4g})" if ci95 else ""
    return f"median {statistics.median(values):.4g}, mean of launches {mean:.4g}{interval}"


def attestation(
    recipe: Mapping[str, Any],
    path: str,
    outcome: Outcome,
    hosts: Sequence[Mapping[str, Any]],
    *,
    simulated_hosts: bool,
    when: str,
) -> str:
    """The Markdown attestation: the recipe, the verifier's facts, both sets of numbers."""
    measured = recipe["measured"]
    objective = recipe["objective"]
    metric = f"{objective['metric']} ({objective.get('goal')}) on workload {objective.get('workload')}"
    out = [
        f"# Recipe verification: {outcome.line}",
        "",
        f"- recipe: `{path}` (config `{measured['config_id']}` of run `{measured['run_id']}`, measured on "
        f"{measured['host']} {measured.get('finished_at')}, bwtune {recipe.get('bwtune_version')})",
        f"- recipe's numbers: {'SIMULATED (the stand-in)' if recipe.get('simulated') else 'real (SGLang)'}",
        f"- verified: {when}, scratch run `{outcome.run_id}` on "
        f"{'SIMULATED hosts (the stand-in)' if simulated_hosts else 'real hosts'}",
        f"- objective: {metric}",
        "",
        "## The verifier's hosts",
        "",
        "| host | GPUs | SM | driver | CUDA | stack fingerprint |",
        "|---|---|---|---|---|---|",
    ]
    for host in hosts:
        facts = host.get("gpu_facts") or {}
        out.append(
            f"| {host.get('host')} | {facts.get('gpus', '-')} | {facts.get('sm', '-')} "
            f"| {facts.get('driver', '-')} | {facts.get('cuda', '-')} "
            f"| {host.get('stack_fingerprint') or '-'} |"
        )
    if outcome.differ:
        out += ["", "Stack inputs that differ from the recipe's:", ""]
        out += [
            f"- {d['words']}: {d['host'] or 'none'} here, the recipe's {d['recipe']}" for d in outcome.differ
        ]
    hardware = recipe.get("hardware") or {}
    out += [
        "",
        f"The recipe's: {hardware.get('model') or '-'} ({hardware.get('gpu') or '-'}), driver "
        f"{hardware.get('driver') or '-'}, CUDA {hardware.get('cuda') or '-'}, stack "
        f"{hardware.get('stack_fingerprint') or '-'}.",
        "",
        "## Numbers",
        "",
        "| | launches | values | summary |",
        "|---|---|---|---|",
        _row("recorded", outcome.reference),
        _row("verified", outcome.candidate),
        "",
        f"Verdict: **{outcome.line}**"
        + (
            " (bwtune.regression.compare: Mann-Whitney U, the change against the launch-to-launch "
            "noise; docs/regression.md)."
            if outcome.candidate
            else "."
        ),
    ]
    if outcome.note:
        out += ["", f"Note: {outcome.note}"]
    for failure in outcome.failures:
        out.append(f"- failed launch: {failure}")
    return "\n".join(out) + "\n"


def _values(launches: Sequence[Sequence[float]]) -> str:
    return "; ".join(", ".join(f"{v:.4g}" for v in launch) for launch in launches) or "-"


def _row(name: str, launches: Sequence[Sequence[float]]) -> str:
    return f"| {name} | {len(launches)} | {_values(launches)} | {_summary(launches)} |"
