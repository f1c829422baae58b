"""The `--json` view of a run (bwtune sweep --json, export, report, promote): each result
as results_fields.VIEW_ORDER lists its keys, the best one and the run's summary."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_fields
from bwtune.store import queries
from bwtune.store.overviews import ID, whole_run_summary

# (`--json` key, the line field it shows or None: computed here), in the view's order.
VIEW = results_fields.view_fields()


def build_run_output(
    conn: sqlite3.Connection, run_id: str, keys: Sequence[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """The `--json` shape: {"schema", "run_id", "results": [...], "best": one of results | None,
    "summary"}.

    Each result has the keys of results_fields.VIEW_ORDER, in that order (docs/architecture.md,
    "Results file", lists them): its line's fields under their `--json` names (the config id
    as `id`; a field the line lacks, e.g. cold_start, null) and the computed objective,
    objective_ci95, objective_launches and attempt; id, host, status, flags, failure and
    metrics are the stable ones. `objective` is the value the result is ranked by: for a
    config with two or more ok launches on one host and stack (a re-measure) the mean over
    them, as `pick_best` pools them, and then `objective_launches` lists each launch oldest
    first (attempt, finished_at, value, ci95, repetitions); null otherwise. The summary
    counts `failed` (launched configs that failed, by class) apart from `not_launched`
    (pruned, duplicate) and `screened_out` (ok).

    `keys` ((host, config id) pairs, e.g. `report_keys`) keeps only those results, for a run
    too big to load whole: the summary still counts every result (by query), and says how
    many it `left_out`.
    """
    run = queries.get_run(conn, run_id)
    objective = queries.resolved_objective(conn, run_id)
    records = queries.run_results(conn, run_id, keys)
    attempts = queries.result_attempts(conn, run_id, keys)
    earlier = queries.superseded_results(conn, run_id, keys)
    # A config launched more than once on one stack (adaptive's finals) shows what pick_best
    # ranks it by: the mean over its launches, the current line and the superseded ones.
    pooled = contract.pooled_launches([*records, *earlier], objective)
    results = []
    for record in records:
        attempt = attempts[(record["host"], record["config_id"])]
        value, ci, launches = _competing_value(record, attempt, objective, pooled)
        computed = {
            "objective": value,
            "objective_ci95": None if ci is None else list(ci),
            "objective_launches": launches,
            "attempt": attempt,
        }
        results.append({key: record.get(name) if name else computed[key] for key, name in VIEW})
    # Every launch of a config competes (pick_best pools a re-measured config's lines).
    best_line = contract.pick_best([*records, *earlier], objective)
    best = (
        None
        if best_line is None
        else next(r for r in results if (r["host"], r[ID]) == (best_line["host"], best_line["config_id"]))
    )
    counts = contract.outcome_counts(records)
    superseded = queries.superseded_count(conn, run_id)
    summary = {
        "objective": objective,
        "results": len(results),
        "configs": len({r[ID] for r in results}),
        "launched": sum(contract.is_launched(r["status"]) for r in results),
        "ok": counts["ok"],
        "failed": counts["failed"],
        "not_launched": counts["not_launched"],
        "screened_out": counts["screened_out"],
        "superseded": superseded,
        "hosts": sorted({r["host"] for r in results}),
        "workloads": sorted({w for result in results for w in result["metrics"]}),
        "simulated": any(r["simulated"] for r in results),
        "plan": run.plan_summary,
        "created_at": run.created_at,
    }
    if keys is not None:
        summary.update(whole_run_summary(conn, run_id))
        summary["left_out"] = summary["results"] - len(results)
    return contract.versioned({"run_id": run_id, "results": results, "best": best, "summary": summary})


def _competing_value(
    record: dict[str, Any],
    attempt: int,
    objective: Mapping[str, Any],
    pooled: Mapping[tuple[str, str, str], tuple[float, list[tuple[float, Mapping[str, Any]]]]],
) -> tuple[float | None, tuple[float, float] | None, list[dict[str, Any]] | None]:
    """A result's objective value, its 95% CI and, for a config with more than one ok launch
    on its stack, each launch oldest first (by attempt): the value is then the mean
    pick_best ranks it by, the CI is over the repetitions of every launch (over the
    launches' values when one lacks repetitions)."""
    group = pooled.get(contract.launch_key(record))
    if contract.eligible_value(record, objective) is None or group is None or len(group[1]) < 2:
        return contract.metric_value(record, objective), contract.metric_ci95(record, objective), None
    mean, measured = group
    # Superseded lines carry their attempt; the current one is the latest.
    ordered = sorted(measured, key=lambda m: int(m[1].get("attempt", attempt)))
    samples = [contract.metric_repetitions(line, objective) for _value, line in ordered]
    values = [value for value, _line in ordered]
    ci = contract.mean_ci95([v for rep in samples for v in rep] if all(samples) else values)[1]
    launches = [
        {
            "attempt": line.get("attempt", attempt),
            "finished_at": line.get("finished_at"),
            "value": value,
            "ci95": None if (line_ci := contract.metric_ci95(line, objective)) is None else list(line_ci),
            "repetitions": len(reps),
        }
        for (value, line), reps in zip(ordered, samples, strict=True)
    ]
    return mean, ci, launches


def nothing_measured(output: Mapping[str, Any]) -> str | None:
    """The one line for a run that measured nothing (every launch failed, or none was
    launched), None when at least one config was measured. `bwtune sweep` exits with
    exit_codes.NOTHING_MEASURED after printing it."""
    summary = output["summary"]
    if summary["ok"]:
        return None
    failed = summary["failed"]
    if failed:
        classes = ", ".join(f"{name} {count}" for name, count in failed.items())
        return (
            f"run {output['run_id']} measured nothing: every launch failed ({classes}); "
            f"see the failures in the report or `bwtune export {output['run_id']} --format json`"
        )
    return f"run {output['run_id']} measured nothing: no config was launched (all pruned or duplicate)"
