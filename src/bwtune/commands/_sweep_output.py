"""How `bwtune sweep` (and `demo`) draw a sweep's outcome: its messages on stderr, the
results table (or `--json`) and the reports' paths on stdout.

(Not a subcommand: it has no `run`, so `bwtune.cli` passes it over.)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import console
from bwtune.app.sweep_service import SweepOutcome


def print_outcome(outcome: SweepOutcome, as_json: bool, stream: Any = None) -> None:
    out = stream if stream is not None else sys.stdout
    for message in outcome.messages:
        print(f"bwtune: {message}", file=sys.stderr)
    if outcome.output is None:
        return
    if as_json:
        print(json.dumps(outcome.output, indent=2, sort_keys=False), file=out)
        return
    print_results_table(outcome.output, out)
    for line in fleet_lines(outcome.output.get("fleet")):
        print(line, file=out)
    for path in outcome.reports:
        print(f"report: {path}", file=out)


def print_results_table(output: Mapping[str, Any], out: Any) -> None:
    """One row per config: best first, then the other measured ones, then the failures."""
    summary = output.get("summary") or {}
    objective = summary.get("objective") or {}
    metric = objective.get("metric", "objective")
    goal = objective.get("goal", "max")
    simulated = summary.get("simulated")
    results = list(output.get("results") or [])
    axes = sorted({axis for result in results for axis in (result.get("point") or {})})
    hosts = {result.get("host") for result in results}
    title = f"run {output.get('run_id')}" + ("  SIMULATED: bwtune stand-in, not a GPU" if simulated else "")
    host_column = ["host"] if len(hosts) > 1 else []
    # A narrow terminal keeps the config, its host, status and value; the last axes go first.
    table = console.table(
        [
            console.Column("config", keep=console.ALWAYS),
            *(console.Column(name, keep=92) for name in host_column),
            *(console.Column(axis, keep=60 - min(index, 30)) for index, axis in enumerate(axes)),
            console.Column("status", whole=False, keep=95),
            console.Column(f"{metric} ({goal})", keep=96, short="objective"),
            console.Column("95% CI", keep=40),
        ],
        title=title,
    )
    best = output.get("best") or {}

    def order(result: Mapping[str, Any]) -> tuple[int, float]:
        value = result.get("objective")
        if value is None:
            return (1, 0.0)
        return (0, -value if goal == "max" else value)

    has_row = {(result.get("host"), result.get("id")) for result in results}
    strategy = (summary.get("plan") or {}).get("strategy") or "the strategy"
    for key, why in (
        ("left_out", f"left out by {strategy}"),
        ("not_reached", "not measured: the sweep stopped first"),
    ):
        for entry in output.get(key) or []:
            if (entry.get("host"), entry.get("id")) not in has_row:  # a row per config of the plan
                results.append({**entry, "status": why, "objective": None})
    for result in sorted(results, key=order):
        is_best = bool(best) and result.get("id") == best.get("id") and result.get("host") == best.get("host")
        value, ci = result.get("objective"), result.get("objective_ci95")
        point = result.get("point") or {}
        table.add_row(
            f"{result.get('id')}{' *' if is_best else ''}",
            *([str(result.get("host"))] if len(hosts) > 1 else []),
            *(str(point.get(axis, "")) for axis in axes),
            _status_text(result, metric),
            "" if value is None else f"{value:.1f}",
            "" if not ci else f"{ci[0]:.1f} .. {ci[1]:.1f}",
            style="bold" if is_best else None,
        )
    console.print_renderable(table, out)
    prior = output.get("prior")
    if prior:
        runs = ", ".join(prior.get("runs") or []) or "earlier runs"
        print(f"prior: {prior.get('configs')} configs' earlier scores from run {runs}", file=out)
    if best:
        note = " (simulated)" if simulated else ""
        value = best.get("objective")
        shown = "" if value is None else f": {value:.1f} {metric}"
        print(f"best: {best.get('id')} on {best.get('host')}{shown}{note}", file=out)


def _status_text(result: Mapping[str, Any], metric: str | None = None) -> str:
    """The status, with the short why of a row that never launched."""
    status = str(result.get("status"))
    reasons = result.get("reasons") or []
    if status == "pruned" and reasons:
        return f"pruned ({reasons[0].get('kind')}: {reasons[0].get('rule')})"
    message = (result.get("failure") or {}).get("message")
    if status == "duplicate" and message:
        return f"duplicate: {message}"
    if status == "ok" and result.get("screened_out"):
        # Measured on the short screening workload only: its value there, not a blank.
        screen = ((result.get("metrics") or {}).get(contract.SCREEN_WORKLOAD) or {}).get("values") or {}
        value = screen.get(metric) if metric else None
        return "ok, screened out" + (f" (screen {value:.1f})" if isinstance(value, int | float) else "")
    return status


def fleet_lines(fleet: Any) -> list[str]:
    """A fleet sweep's hosts (docs/fleet.md): per group and host its share, done, failed and
    queued launches, whether it was lost, and what was reassigned where."""
    if not isinstance(fleet, Mapping):
        return []
    groups = list(fleet.get("groups") or [])
    hosts = list(fleet.get("hosts") or [])
    lines = [f"fleet: {len(hosts)} hosts in {len(groups)} hardware group(s), {fleet.get('rounds')} round(s)"]
    for group in groups:
        if len(groups) > 1:
            lines.append(f"  group {group.get('key')}: {group.get('launches')} launches")
        for row in (r for r in hosts if r.get("group") == group.get("key")):
            lost = ", lost: its unfinished launches were reassigned" if row.get("lost") else ""
            lines.append(
                f"  {row.get('host')}: {row.get('assigned')} assigned, {row.get('done')} done, "
                f"{row.get('failed')} failed, {row.get('queued')} queued{lost}"
            )
    for entry in fleet.get("reassigned") or []:
        moved = "; ".join(
            f"{', '.join(ids)} to {host}" for host, ids in sorted((entry.get("to") or {}).items())
        )
        lines.append(
            f"reassigned after round {entry.get('round')}: from {entry.get('host')}: {moved or 'nothing'}"
        )
    return lines
