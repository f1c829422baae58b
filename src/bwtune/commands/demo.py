"""`bwtune demo`: a whole sweep on this machine against the SGLang stand-in (simulated GPUs)."""

from __future__ import annotations

import argparse
import os
import sys

from bwtune import ansible_run, collection, exit_codes, store
from bwtune.app import sweep_service
from bwtune.commands._sweep_output import print_outcome

NAME = "demo"
HELP = "Sweep the demo matrix on localhost with the SGLang stand-in (simulated, no GPU needed)."

# Stand-in startups take this fraction of a real server's: the demo stays under a few minutes.
DEMO_STARTUP_SCALE = "0.02"
SCALE_ENV = "BWTUNE_STANDIN_STARTUP_SCALE"


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
    print_outcome(outcome, as_json=args.json)
    return outcome.exit_code


def _fresh(args: argparse.Namespace) -> sweep_service.SweepRequest:
    root = collection.collection_root()
    # The settings go with the run (run_settings): a resume starts servers at the same scale.
    scale = os.environ.get(SCALE_ENV) or DEMO_STARTUP_SCALE
    return sweep_service.SweepRequest(
        inventory=ansible_run.load_inventory(root / "inventory" / "local.yml"),
        matrix=sweep_service.load_matrix(root / "examples" / "demo.yml"),
        matrix_source=str(root / "examples" / "demo.yml"),
        run_id=ansible_run.new_run_id(),
        command=NAME,
        strategy=args.strategy or "grid",
        node_results_dir=str(store.bwtune_home() / "sweeps"),
        quiet=args.quiet,
        node_env={SCALE_ENV: scale},
    )


def _resume(args: argparse.Namespace) -> sweep_service.SweepRequest:
    saved = sweep_service.load_settings(args.resume, "--resume")
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
