"""`bwtune demo`: a whole sweep on this machine against the SGLang stand-in (simulated GPUs)."""

from __future__ import annotations

import argparse
import os
import sys

from bwtune import collection, results_db, runner
from bwtune.commands import sweep

NAME = "demo"
HELP = "Sweep the demo matrix on localhost with the SGLang stand-in (simulated, no GPU needed)."

# Stand-in startups take this fraction of a real server's: the demo stays under a few minutes.
DEMO_STARTUP_SCALE = "0.02"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--strategy", choices=sweep.STRATEGIES, default="grid", help="how configs are chosen")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    root = collection.collection_root()
    scale = os.environ.setdefault("BWTUNE_STANDIN_STARTUP_SCALE", DEMO_STARTUP_SCALE)
    try:
        request = sweep.SweepRequest(
            inventory=runner.load_inventory(root / "inventory" / "local.yml"),
            matrix=sweep.load_matrix(root / "examples" / "demo.yml"),
            matrix_source=str(root / "examples" / "demo.yml"),
            run_id=runner.new_run_id(),
            strategy=args.strategy,
            node_results_dir=str(results_db.bwtune_home() / "sweeps"),
            quiet=args.quiet,
            node_env={"BWTUNE_STANDIN_STARTUP_SCALE": scale},
        )
    except (sweep.BadInput, runner.InventoryError) as exc:
        print(f"bwtune: demo: {exc}", file=sys.stderr)
        return sweep.EXIT_BAD_INPUT
    outcome = sweep.run_sweep(request)
    sweep.print_outcome(outcome, as_json=args.json)
    return outcome.exit_code
