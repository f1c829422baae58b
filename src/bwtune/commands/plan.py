"""`bwtune plan`: expand a sweep matrix, prune what SGLang or the GPU would refuse, show the launches."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any, TextIO

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import VALID, Plan, plan
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategy_launches
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import CatalogError
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.rules import GPUS
from bwtune import console, exit_codes, launch_cost, store
from bwtune.app.plan_service import estimate_cost
from bwtune.matrix_file import MatrixFileError, load

NAME = "plan"
HELP = "Plan a sweep: expand MATRIX, prune refused configs (with reasons), list the launches."

# A plan of more configs than this prints a summary (the counts, the configs pruned by each
# reason, the first SUMMARY_ROWS launches) unless --all; a smaller one, every row.
SUMMARY_OVER = 200
SUMMARY_ROWS = 50


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("matrix", metavar="MATRIX", help="the sweep matrix (YAML)")
    parser.add_argument("--gpu", choices=GPUS, help="plan for this GPU (overrides hardware.gpu)")
    parser.add_argument("--sglang-version", metavar="V", help="plan for this SGLang release")
    parser.add_argument("--facts", metavar="FILE", help="node facts (JSON) for gpu: auto / version: auto")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON on stdout")
    parser.add_argument(
        "--all",
        action="store_true",
        help=f"a row for every config (a plan of more than {SUMMARY_OVER} prints a summary)",
    )
    # The GPU-hours estimate learns from measured launches of the plan's GPU in this database.
    store.add_db_argument(parser)
    # Before --json was every command's spelling; kept so scripts keep working, not listed.
    parser.add_argument("--format", choices=("table", "json"), help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.format:
        print(f"bwtune plan: --format {args.format} is deprecated; use --json (or nothing)", file=sys.stderr)
    try:
        result = _plan(args)
    except _BadInput as err:
        print(f"bwtune plan: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    cost = estimate_cost(result, args.db)
    if args.json or args.format == "json":
        json.dump(plan_output(result, cost), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_plan(result, cost, every_row=args.all)
    return exit_codes.OK


def gpu_hours(result: Plan, cost: launch_cost.LaunchCost) -> float:
    """GPU-hours of every launch of the plan at `cost` per launch (each holds its GPUs)."""
    return round(cost.per_launch_s * result.summary["estimate"]["gpu_launches"] / 3600.0, 2)


def plan_output(result: Plan, cost: launch_cost.LaunchCost) -> dict[str, Any]:
    """The plan JSON, its summary's estimate at `cost` (with where the figures come from)."""
    out = result.to_dict()
    estimate = out["summary"]["estimate"]
    estimate.update(cost.as_dict())
    estimate["gpu_hours"] = gpu_hours(result, cost)
    return results_contract.versioned(out)


class _BadInput(Exception):
    pass


def _plan(args: argparse.Namespace) -> Plan:
    facts = _read_facts(args.facts) if args.facts else None
    try:
        matrix_file = load(args.matrix)
    except MatrixFileError as err:
        raise _BadInput(str(err)) from None
    try:
        return plan(matrix_file.data, gpu=args.gpu, sglang_version=args.sglang_version, facts=facts)
    except MatrixError as err:
        raise _BadInput(f"{matrix_file.where(err.path)}: {err}") from None
    except CatalogError as err:
        raise _BadInput(f"{matrix_file.path}: {err}") from None


def _read_facts(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            facts = json.load(fh)
    except (OSError, ValueError) as err:
        raise _BadInput(f"{path}: cannot read facts: {err}") from None
    if not isinstance(facts, dict):
        raise _BadInput(f"{path}: facts must be a JSON object")
    return facts


def print_plan(
    result: Plan, cost: launch_cost.LaunchCost, stream: TextIO | None = None, every_row: bool = True
) -> None:
    """One row per config (id, the axis values, status, first reason), then the summary.

    Without `every_row`, a plan of more than SUMMARY_OVER configs (drawing 10,000 rows is
    slow and no one reads them) shows its first SUMMARY_ROWS launches, the same summary,
    the pruned configs counted by reason, and how to see every row."""
    summarised = not every_row and len(result.configs) > SUMMARY_OVER
    configs = result.configs
    if summarised:
        launches = [config for config in configs if config.status == VALID]
        configs = (launches or configs)[:SUMMARY_ROWS]
    rows = []
    for config in configs:
        if config.reasons:
            first = config.reasons[0]
            more = f" (+{len(config.reasons) - 1})" if len(config.reasons) > 1 else ""
            note = f"{first.kind}: {first.rule}{more}"
        elif config.duplicate_of:
            note = f"same launch as {config.duplicate_of}"
        else:
            note = ""
        rows.append([config.id, *(_cell(config.point[a]) for a in result.axes), config.status, note])
    s = result.summary
    hours = gpu_hours(result, cost)
    caption = (
        f"{s['expanded']} configs ({s['combinations']} combinations, {s['excluded']} excluded): "
        f"{s['valid']} valid, {s['pruned']} pruned, {s['duplicates']} duplicates\n"
        f"{s['launches']} launches x {s['workloads_per_launch']} workloads, "
        f"about {hours} GPU-hours ({cost.startup_s:.0f} s startup, "
        f"{cost.per_launch_s:.0f} s per launch; {cost.describe()})\n{_by_strategy(result, cost)}"
    )
    # Narrow terminals keep the id, the status and the first axes; the last axes go first.
    axes = [console.Column(axis, keep=60 - min(index, 30)) for index, axis in enumerate(result.axes)]
    console.print_table(
        [
            console.Column("id", keep=console.ALWAYS),
            *axes,
            console.Column("status", keep=95),
            console.Column("reason", whole=False, keep=70),
        ],
        rows,
        title=f"SGLang {result.sglang_version}{_rules_note(result)} on {result.gpu}: {result.model_path}",
        caption=caption,
        stream=stream,
    )
    if summarised:
        _print_reasons(result, stream)
        shown = "launches" if configs[0].status == VALID else "configs (none is launched)"
        print(
            f"{len(rows)} of {len(result.configs)} rows shown (the first {len(rows)} {shown}, "
            f"in plan order): --all shows every row, --json the whole plan",
            file=stream if stream is not None else sys.stdout,
        )


def _print_reasons(result: Plan, stream: TextIO | None) -> None:
    """How many configs each reason prunes, most first (a config pruned for several
    reasons counts under each)."""
    counts: Counter[str] = Counter()
    for config in result.configs:
        counts.update({f"{reason.kind}: {reason.rule}" for reason in config.reasons})
    if not counts:
        return
    console.print_table(
        [console.Column("configs", keep=console.ALWAYS), console.Column("pruned by", whole=False, keep=90)],
        sorted(((n, reason) for reason, n in counts.items()), key=lambda row: (-row[0], row[1])),
        title="pruned configs by reason (one pruned for several reasons counts under each):",
        stream=stream,
    )


def _rules_note(result: Plan) -> str:
    """For a build between releases: whose rules the plan applied."""
    if result.rules_release == result.sglang_version:
        return ""
    return f" (rules of {result.rules_release or 'no known release: older than all'})"


def _by_strategy(result: Plan, cost: launch_cost.LaunchCost) -> str:
    """Launches and GPU-hours per sweep strategy (full launches; screening makes some cheaper)."""
    gpu_seconds = cost.per_launch_s * result.summary["estimate"]["gpu_launches"]
    per_launch = gpu_seconds / 3600.0 / max(result.summary["launches"], 1)
    parts = []
    plan_dict = result.to_dict()
    for name, (fewest, most) in strategy_launches.planned_launches(plan_dict).items():
        launches = str(fewest) if fewest == most else f"{fewest}-{most}"
        hours = f"{fewest * per_launch:.1f}" + ("" if fewest == most else f"-{most * per_launch:.1f}")
        parts.append(f"{name} {launches} launches ({hours} GPU-h)")
    failing = strategy_launches.launches_while_nothing_runs(plan_dict)
    return (
        "by strategy: " + ", ".join(parts) + "; screen and adaptive screen each launch first, "
        "adaptive stops when nothing can win by more than the noise it measured or a third of "
        "the configs are launched (failed ones included; while every launch fails it goes on "
        f"until one runs, up to {failing} launches); each strategy then re-measures, up to "
        "three launches, a winner whose lead is within the measured noise (docs/benchmarks.md, "
        "Search on unseen landscapes)"
    )


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
