"""`bwtune demo`: a whole sweep on this machine against the SGLang stand-in (simulated GPUs)."""

from __future__ import annotations

import argparse
import os
import sys

from bwtune import collection, exit_codes, results_db, runner
from bwtune.commands import sweep

NAME = "demo"
HELP = "Sweep the demo matrix on localhost with the SGLang stand-in (simulated, no GPU needed)."

# Stand-in startups take this fraction of a real server's: the demo stays under a few minutes.
DEMO_STARTUP_SCALE = "0.02"
SCALE_ENV = "BWTUNE_STANDIN_STARTUP_SCALE"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strategy",
        choices=sweep.STRATEGIES,
        help="how configs are chosen (default grid: the demo measures every config)",
    )
    parser.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="continue this demo run with its own settings (start-up scale included): configs done are kept",
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    try:
        request = _resume(args) if args.resume else _fresh(args)
        results_db.check_writable()
    except (sweep.BadInput, runner.InventoryError, results_db.StorageError) as exc:
        print(f"bwtune: demo: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    outcome = sweep.run_sweep(request)
    sweep.print_outcome(outcome, as_json=args.json)
    return outcome.exit_code


def _fresh(args: argparse.Namespace) -> sweep.SweepRequest:
    root = collection.collection_root()
    # The settings go with the run (run_settings): a resume starts servers at the same scale.
    scale = os.environ.get(SCALE_ENV) or DEMO_STARTUP_SCALE
    return sweep.SweepRequest(
        inventory=runner.load_inventory(root / "inventory" / "local.yml"),
        matrix=sweep.load_matrix(root / "examples" / "demo.yml"),
        matrix_source=str(root / "examples" / "demo.yml"),
        run_id=runner.new_run_id(),
        command=NAME,
        strategy=args.strategy or "grid",
        node_results_dir=str(results_db.bwtune_home() / "sweeps"),
        quiet=args.quiet,
        node_env={SCALE_ENV: scale},
    )


def _resume(args: argparse.Namespace) -> sweep.SweepRequest:
    saved = sweep.load_settings(args.resume, "--resume")
    if saved is None or saved.command != NAME:
        raise sweep.BadInput(f"--resume {args.resume}: not a demo run (resume it with bwtune sweep --resume)")
    matrix, source = sweep.saved_matrix(args.resume, "--resume")
    return sweep.SweepRequest(
        inventory=runner.load_inventory(saved.inventory),
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
