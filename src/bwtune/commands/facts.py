"""`bwtune facts`: what each host has (GPUs, driver, CUDA, torch, SGLang) and which can share a sweep."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from bwtune import console
from bwtune.analysis.hardware_group import HardwareGroup
from bwtune.app.facts_service import FACTS_PLAYBOOK, host_facts
from bwtune.commands import _task_playbook as task_playbook

NAME = "facts"
HELP = "Gather GPU, software stack and checkpoint facts from the inventory's hosts."

COLUMNS = ("host", "GPUs", "sm", "driver", "CUDA", "torch", "sgl_kernel", "sglang", "stack", "fingerprint")
# Two hashes, each named for what it hashes (docs/facts.md): `stack` is provision's name for the
# stack (its directory under the stack root: a hash of the build inputs); `fingerprint` hashes
# the installed versions and the driver, and groups hosts for a shared sweep.
# How the table draws them: a narrow terminal keeps the host, its GPUs and SGLang first (the
# sweep groups under the table say which hosts share a fingerprint); --wide shows them all.
TABLE_COLUMNS = (
    console.Column("host", keep=console.ALWAYS),
    console.Column("GPUs", whole=False, keep=90),
    console.Column("sm", keep=85),
    console.Column("driver", keep=60),
    console.Column("CUDA", keep=55),
    console.Column("torch", keep=50),
    console.Column("sgl_kernel", keep=40),
    console.Column("sglang", keep=70),
    console.Column("stack", keep=47),
    console.Column("fingerprint", keep=45),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    task_playbook.add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print every host's facts as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    done = task_playbook.run_task_playbook(FACTS_PLAYBOOK, args, "facts")
    if done.outcome is None or done.inventory is None or done.exit_code:
        return done.exit_code
    outcome, inventory = done.outcome, done.inventory
    facts = host_facts(outcome)
    rows = [host_row(host, facts[host], inventory.simulated(host)) for host in sorted(facts)]
    groups = sweep_groups(rows)
    if args.json:
        body = results_contract.versioned({"hosts": facts, "rows": rows, "groups": groups})
        json.dump(body, sys.stdout, indent=2, default=str)
        print()
    else:
        print_facts(rows, groups)
    return task_playbook.report_failures(outcome, "facts")


def host_row(host: str, facts: Mapping[str, Any], simulated: bool) -> dict[str, str]:
    """One table row from bwtune_gpu and bwtune_stack (docs/facts.md); "-" where unknown."""
    gpu = _mapping(facts.get("bwtune_gpu"))
    stack = _mapping(facts.get("bwtune_stack"))
    if gpu.get("available") is False:
        gpus = f"none ({gpu.get('reason') or 'unavailable'})"
    else:
        gpus = _text(gpu.get("message") or gpu.get("count"))
    return {
        "host": host + (" (simulated)" if simulated else ""),
        "GPUs": gpus,
        "sm": _text(gpu.get("sm")),
        "driver": _text(gpu.get("driver_version")),
        "CUDA": _text(gpu.get("cuda_version")),
        "torch": _text(_mapping(stack.get("torch")).get("version")),
        "sgl_kernel": _text(_mapping(stack.get("sgl_kernel")).get("sm_targets")),
        "sglang": _text(_mapping(stack.get("sglang")).get("version")),
        "stack": _text(stack.get("build_fingerprint")),
        "fingerprint": _text(stack.get("fingerprint")),
        # Not a column: the hosts one sweep's results hold for share this key.
        "group": HardwareGroup.of_facts(facts).key() if gpu.get("available") else f"none: {gpus}",
    }


def sweep_groups(rows: list[dict[str, str]]) -> list[list[str]]:
    """Hosts whose GPUs and software stack match (bwtune.analysis.hardware_group's same_stack
    grain: GPU model, count, SM, interconnect, stack fingerprint): one sweep's results hold
    for all of them."""
    groups: dict[str, list[str]] = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row["host"])
    return sorted(groups.values())


def print_facts(rows: list[dict[str, str]], groups: list[list[str]]) -> None:
    console.print_table(TABLE_COLUMNS, ([row[column] for column in COLUMNS] for row in rows), title="hosts")
    for number, hosts in enumerate(groups, start=1):
        print(f"sweep group {number}: {', '.join(hosts)}")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    if value is None or value == "" or value == []:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)
