"""`bwtune demo`: a whole sweep on this machine against the SGLang stand-in (simulated GPUs).

`--capacity` sweeps the small capacity run instead (bwtune.app.demo_capacity, issue 26):
each config's highest request rate under the latency SLO, and the Pareto front.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from bwtune import ansible_run, collection, exit_codes, store
from bwtune.analysis.capacity import slo_text, value_text
from bwtune.app import demo_capacity, sweep_service
from bwtune.commands._sweep_output import print_outcome

NAME = "demo"
HELP = "Sweep the demo matrix on localhost with the SGLang stand-in (simulated, no GPU needed)."

# Stand-in startups take this fraction of a real server's: the demo stays under a few minutes.
DEMO_STARTUP_SCALE = "0.02"
SCALE_ENV = "BWTUNE_STANDIN_STARTUP_SCALE"
MAX_HOSTS = 16
FLEET_PORTS = 30000  # host n's servers start at FLEET_PORTS + 1000 * n


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strategy",
        choices=sweep_service.STRATEGIES,
        help="how configs are chosen (default grid: the demo measures every config)",
    )
    parser.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="continue this demo run with its own settings (start-up scale included): configs done are kept",
    )
    parser.add_argument(
        "--capacity",
        action="store_true",
        help="sweep the small capacity run instead: each config's highest request rate under "
        "the latency SLO of examples/qwen35-397b-capacity.yml, and the Pareto front (a few minutes)",
    )
    parser.add_argument(
        "--hosts",
        type=int,
        default=1,
        metavar="N",
        help="run the demo as a simulated fleet of N local stand-in hosts (each its own node folder "
        f"and ports; 1-{MAX_HOSTS}): the grid's launches are shared among them (docs/fleet.md)",
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    try:
        request = _resume(args) if args.resume else _fresh(args)
        store.check_writable()
    except (sweep_service.BadInput, ansible_run.InventoryError, store.StorageError) as exc:
        print(f"bwtune: demo: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    outcome = sweep_service.run_sweep(request)
    found = demo_capacity.summary(outcome.output) if outcome.output is not None else None
    if found and found["capacity"] and args.json and outcome.output is not None:
        # As `bwtune report --json` (capacity, pareto_fronts), and the per-GPU fronts.
        outcome.output = {
            **outcome.output,
            "capacity": found["capacity"],
            "pareto_fronts": found["fronts"],
            "speed_fronts": found["speed_fronts"],
        }
    print_outcome(outcome, as_json=args.json)
    if found and found["capacity"] and not args.json:
        for line in capacity_lines(found, outcome.output.get("best") if outcome.output else None):
            print(line)
    return outcome.exit_code


def capacity_lines(found: dict[str, Any], best: dict[str, Any] | None) -> list[str]:
    """The capacity run's summary after the table: per capacity workload its SLO, each
    config's capacity (highest first, the winner starred), then its fronts."""
    sim = "  SIMULATED: bwtune stand-in, not a GPU" if found["simulated"] else ""
    best_key = (best.get("host"), best.get("id")) if best else None
    lines: list[str] = []
    for workload in sorted({row["workload"] for row in found["capacity"]}):
        rows = [row for row in found["capacity"] if row["workload"] == workload]
        lines += ["", f"capacity under the SLO {slo_text(rows[0]['slo'])} (workload {workload}){sim}"]
        for row in rows:
            star = " *" if (row["host"], row["id"]) == best_key else ""
            bracket = (
                f"last passing {_rate(row['last_passing'])}, first failing {_rate(row['first_failing'])}"
            )
            note = f"; {row['reason']}" if row["reason"] else ""
            lines.append(f"  {row['id']}{star}: {value_text(row)} ({bracket}, {row['rounds']} rounds{note})")
        for front in (f for f in found["fronts"] if f["workload"] == workload):
            limit = "" if front["slo"] is None else f", SLO {front['slo']:g} ms"
            on = ", ".join(_front_point(p) for p in front["points"] if p["on_front"])
            lines.append(
                f"  Pareto front, {front['throughput_metric']} (tok/s) against {front['latency_metric']}"
                f"{limit}: {on}"
            )
        for front in (f for f in found.get("speed_fronts") or [] if f["workload"] == workload):
            on = ", ".join(_speed_point(p) for p in front["points"] if p["on_front"])
            lines.append(f"  Pareto front, tok/s per user against tok/s per GPU: {on}")
    return lines


def _speed_point(point: dict[str, Any]) -> str:
    star = " *" if point["is_best"] else ""
    return f"{point['id']}{star} ({point['per_user']:.1f} tok/s per user, {point['per_gpu']:.1f} per GPU)"


def _front_point(point: dict[str, Any]) -> str:
    star = " *" if point["is_best"] else ""
    return f"{point['id']}{star} ({point['throughput']:.0f} tok/s, {point['latency']:.1f} ms)"


def _rate(value: Any) -> str:
    return f"{value:.3g}/s" if isinstance(value, int | float) and not isinstance(value, bool) else "none"


def fleet_inventory(root: Any, run_id: str, hosts: int) -> Any:
    """`hosts` stand-in hosts on this machine, as inventory/local.yml's one: a local
    connection each, and each its own results folder (so its own node lock) and ports."""
    home = store.bwtune_home()
    names = [f"standin-{n}" for n in range(1, hosts + 1)]
    inventory = {
        "all": {
            "hosts": {
                name: {
                    "sweep_results_dir": str(home / "sweeps" / name),
                    "sweep_port": FLEET_PORTS + 1000 * n,
                }
                for n, name in enumerate(names)
            },
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                "bwtune_simulated": True,
                "bwtune_stack_python": "{{ ansible_playbook_python }}",
                "bwtune_model_path": str(root / "examples" / "models" / "qwen35-397b-a17b-nvfp4"),
                "sweep_launch_command": ["{{ ansible_playbook_python }}", "-m", "bwtune.standin"],
                "sweep_env": {
                    # The run's scale (node_env reaches ansible's environment), as local.yml's.
                    SCALE_ENV: "{{ lookup('ansible.builtin.env', '"
                    + SCALE_ENV
                    + "', default='"
                    + DEMO_STARTUP_SCALE
                    + "') }}"
                },
            },
        }
    }
    folder = store.run_dir(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "inventory.json"  # JSON is YAML: ansible-inventory reads it
    path.write_text(json.dumps(inventory, indent=1), encoding="utf-8")
    return path


def _fresh(args: argparse.Namespace) -> sweep_service.SweepRequest:
    root = collection.collection_root()
    hosts = getattr(args, "hosts", 1)
    if not 1 <= hosts <= MAX_HOSTS:
        raise sweep_service.BadInput(f"--hosts {hosts}: give 1 to {MAX_HOSTS} stand-in hosts")
    # The settings go with the run (run_settings): a resume starts servers at the same scale.
    scale = os.environ.get(SCALE_ENV) or DEMO_STARTUP_SCALE
    if getattr(args, "capacity", False):
        matrix, source = demo_capacity.capacity_matrix(root)
    else:
        matrix, source = (
            sweep_service.load_matrix(root / demo_capacity.DEMO_MATRIX),
            str(root / demo_capacity.DEMO_MATRIX),
        )
    run_id = ansible_run.new_run_id()
    inventory = root / "inventory" / "local.yml" if hosts == 1 else fleet_inventory(root, run_id, hosts)
    return sweep_service.SweepRequest(
        inventory=ansible_run.load_inventory(inventory),
        matrix=matrix,
        matrix_source=source,
        run_id=run_id,
        command=NAME,
        strategy=args.strategy or "grid",
        # A fleet's hosts keep their own folders (the inventory's): one folder would be one node lock.
        node_results_dir=str(store.bwtune_home() / "sweeps") if hosts == 1 else None,
        quiet=args.quiet,
        node_env={SCALE_ENV: scale},
    )


def _resume(args: argparse.Namespace) -> sweep_service.SweepRequest:
    if getattr(args, "capacity", False):
        raise sweep_service.BadInput(
            f"--capacity with --resume {args.resume}: a resumed demo run keeps its own matrix; "
            "give one of them"
        )
    if getattr(args, "hosts", 1) != 1:
        raise sweep_service.BadInput(
            f"--hosts {args.hosts} with --resume {args.resume}: a resumed demo run keeps its own hosts; "
            "give one of them"
        )
    saved = sweep_service.load_settings(args.resume, "--resume")
    if saved is None and not store.run_dir(args.resume).is_dir():
        raise sweep_service.unknown_run(args.resume, "--resume")
    if saved is None or saved.command != NAME:
        raise sweep_service.BadInput(
            f"--resume {args.resume}: not a demo run (resume it with bwtune sweep --resume)"
        )
    matrix, source = sweep_service.saved_matrix(args.resume, "--resume")
    return sweep_service.SweepRequest(
        inventory=ansible_run.load_inventory(saved.inventory),
        matrix=matrix,
        matrix_source=source,
        run_id=args.resume,
        command=NAME,
        strategy=args.strategy or saved.strategy or "grid",
        node_results_dir=saved.node_results_dir,
        quiet=args.quiet,
        resumed=True,
        node_env=dict(saved.node_env),
    )
