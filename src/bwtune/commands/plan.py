"""`bwtune plan`: expand a sweep matrix, prune what SGLang or the GPU would refuse, show the launches."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from ansible_collections.bwtune.sglang.plugins.module_utils import strategies
from ansible_collections.bwtune.sglang.plugins.module_utils.catalog import CatalogError
from ansible_collections.bwtune.sglang.plugins.module_utils.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils.planner import Plan, plan
from ansible_collections.bwtune.sglang.plugins.module_utils.rules import GPUS
from bwtune import console, exit_codes
from bwtune.matrix_file import MatrixFileError, load

NAME = "plan"
HELP = "Plan a sweep: expand MATRIX, prune refused configs (with reasons), list the launches."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("matrix", metavar="MATRIX", help="the sweep matrix (YAML)")
    parser.add_argument("--gpu", choices=GPUS, help="plan for this GPU (overrides hardware.gpu)")
    parser.add_argument("--sglang-version", metavar="V", help="plan for this SGLang release")
    parser.add_argument("--facts", metavar="FILE", help="node facts (JSON) for gpu: auto / version: auto")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON on stdout")
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
    if args.json or args.format == "json":
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_plan(result)
    return exit_codes.OK


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


def print_plan(result: Plan, stream: TextIO | None = None) -> None:
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
    est = s["estimate"]
    caption = (
        f"{s['expanded']} configs ({s['combinations']} combinations, {s['excluded']} excluded): "
        f"{s['valid']} valid, {s['pruned']} pruned, {s['duplicates']} duplicates\n"
        f"{s['launches']} launches x {s['workloads_per_launch']} workloads, "
        f"about {est['gpu_hours']} GPU-hours (estimate: {est['startup_s']:.0f} s startup, "
        f"{est['per_launch_s']:.0f} s per launch)\n{_by_strategy(result)}"
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


def _by_strategy(result: Plan) -> str:
    """Launches and GPU-hours per sweep strategy (full launches; screening makes some cheaper)."""
    per_launch = result.summary["estimate"]["gpu_hours"] / max(result.summary["launches"], 1)
    parts = []
    for name, (fewest, most) in strategies.planned_launches(result.to_dict()).items():
        launches = str(fewest) if fewest == most else f"{fewest}-{most}"
        hours = f"{fewest * per_launch:.1f}" + ("" if fewest == most else f"-{most * per_launch:.1f}")
        parts.append(f"{name} {launches} launches ({hours} GPU-h)")
    return (
        "by strategy: " + ", ".join(parts) + "; screen and adaptive screen each launch first, "
        "adaptive stops when nothing can win (docs/benchmarks.md, Search cost)"
    )


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
