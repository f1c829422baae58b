"""`bwtune plan`: expand a sweep matrix, prune what SGLang or the GPU would refuse, show the launches."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from ansible_collections.bwtune.sglang.plugins.module_utils import strategies
from ansible_collections.bwtune.sglang.plugins.module_utils.catalog import CatalogError
from ansible_collections.bwtune.sglang.plugins.module_utils.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils.planner import Plan, plan
from ansible_collections.bwtune.sglang.plugins.module_utils.rules import GPUS
from bwtune import console, exit_codes, launch_cost, results_db
from bwtune.matrix_file import MatrixFileError, load

NAME = "plan"
HELP = "Plan a sweep: expand MATRIX, prune refused configs (with reasons), list the launches."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("matrix", metavar="MATRIX", help="the sweep matrix (YAML)")
    parser.add_argument("--gpu", choices=GPUS, help="plan for this GPU (overrides hardware.gpu)")
    parser.add_argument("--sglang-version", metavar="V", help="plan for this SGLang release")
    parser.add_argument("--facts", metavar="FILE", help="node facts (JSON) for gpu: auto / version: auto")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON on stdout")
    # The GPU-hours estimate learns from measured launches of the plan's GPU in this database.
    results_db.add_db_argument(parser)
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
        print_plan(result, cost)
    return exit_codes.OK


def estimate_cost(result: Plan, db: Path | None) -> launch_cost.LaunchCost:
    """The cost of one launch: from the database's measured launches on the plan's GPU, else
    the matrix's estimates. A database that cannot be read is said on stderr, never fatal."""
    est = result.summary["estimate"]
    matrix_startup_s = float(est["startup_s"])
    matrix_workload_s = float(est["per_launch_s"]) - matrix_startup_s
    lines: list[dict[str, Any]] = []
    path = db if db is not None else results_db.default_db_path()
    if path.is_file():
        try:
            conn = results_db.connect(path, create=False)  # planning never creates a database
            try:
                lines = results_db.launched_lines(conn, str(result.gpu))
            finally:
                conn.close()
        except (results_db.SchemaTooNewError, *results_db.DB_INPUT_ERRORS) as err:
            print(f"bwtune plan: {path}: {err}; estimating from the matrix", file=sys.stderr)
    workloads = [str(w.get("name")) for w in (result.launches[0]["workloads"] if result.launches else [])]
    return launch_cost.estimate(
        lines, workloads, matrix_startup_s=matrix_startup_s, matrix_workload_s=matrix_workload_s
    )


def gpu_hours(result: Plan, cost: launch_cost.LaunchCost) -> float:
    """GPU-hours of every launch of the plan at `cost` per launch (each holds its GPUs)."""
    return round(cost.per_launch_s * result.summary["estimate"]["gpu_launches"] / 3600.0, 2)


def plan_output(result: Plan, cost: launch_cost.LaunchCost) -> dict[str, Any]:
    """The plan JSON, its summary's estimate at `cost` (with where the figures come from)."""
    out = result.to_dict()
    estimate = out["summary"]["estimate"]
    estimate.update(cost.as_dict())
    estimate["gpu_hours"] = gpu_hours(result, cost)
    return out


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


def print_plan(result: Plan, cost: launch_cost.LaunchCost, stream: TextIO | None = None) -> None:
    """One row per config (id, the axis values, status, first reason), then the summary."""
    rows = []
    for config in result.configs:
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
    console.print_table(
        ["id", *result.axes, "status", "reason"],
        rows,
        title=f"SGLang {result.sglang_version}{_rules_note(result)} on {result.gpu}: {result.model_path}",
        caption=caption,
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
    for name, (fewest, most) in strategies.planned_launches(result.to_dict()).items():
        launches = str(fewest) if fewest == most else f"{fewest}-{most}"
        hours = f"{fewest * per_launch:.1f}" + ("" if fewest == most else f"-{most * per_launch:.1f}")
        parts.append(f"{name} {launches} launches ({hours} GPU-h)")
    return (
        "by strategy: " + ", ".join(parts) + "; screen and adaptive screen each launch first, "
        "adaptive stops when nothing can win or a third of the configs are launched, then "
        "re-measures up to two (docs/benchmarks.md, Search cost)"
    )


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
