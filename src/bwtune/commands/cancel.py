"""`bwtune cancel RUN_ID`: stop a run's sweep on its nodes (each keeps its results file)."""

from __future__ import annotations

import argparse
import sys

from bwtune import exit_codes, runner
from bwtune.commands import _playbook_options as playbook_options
from bwtune.commands import sweep

NAME = "cancel"
HELP = "Stop a run's sweep on its nodes: each stops its server and keeps its results file."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run to stop")
    playbook_options.add_arguments(parser, inventory_required=False)
    parser.add_argument("--node-results-dir", help="where the nodes keep results files (default: the run's)")


def run(args: argparse.Namespace) -> int:
    try:
        saved = sweep.load_settings(args.run_id, "cancel")
        inventory_path = args.inventory or (saved.inventory if saved else None)
        if not inventory_path:
            raise sweep.BadInput(f"give an inventory with -i INVENTORY (run {args.run_id} kept none)")
        limit = args.limit if args.limit is not None else (saved.limit if saved else None)
        extra = args.extra_vars if args.extra_vars is not None else (saved.extra_vars if saved else [])
        request = sweep.SweepRequest(
            inventory=runner.load_inventory(inventory_path, limit),
            matrix={},
            matrix_source="",
            run_id=args.run_id,
            command=saved.command if saved else sweep.NAME,
            limit=limit,
            node_results_dir=args.node_results_dir or (saved.node_results_dir if saved else None),
            extra_vars=playbook_options.check_extra_vars(extra),
            verbosity=playbook_options.verbosity(args),
        )
    except (sweep.BadInput, runner.InventoryError, playbook_options.ExtraVarsError) as exc:
        print(f"bwtune: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    messages = sweep.stop_run(request, runner.private_data_dir(args.run_id))
    for message in messages:
        print(f"bwtune: {message}", file=sys.stderr)
    failed = any(not message.startswith("cancelled run ") for message in messages)
    if not failed:
        print(f"resume with: {request.resume_command()}", file=sys.stderr)
    return exit_codes.HOST_FAILED if failed else exit_codes.OK
