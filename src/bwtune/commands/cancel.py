"""`bwtune cancel RUN_ID`: stop a run's sweep on its nodes (each keeps its results file)."""

from __future__ import annotations

import argparse
import json
import sys

from bwtune import ansible_run, exit_codes
from bwtune.app import sweep_service
from bwtune.commands import _playbook_options as playbook_options

NAME = "cancel"
HELP = "Stop a run's sweep on its nodes: each stops its server and keeps its results file."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run to stop")
    playbook_options.add_arguments(
        parser, inventory_required=False, inventory_default="default: the run's own"
    )
    parser.add_argument("--node-results-dir", help="where the nodes keep results files (default: the run's)")
    parser.add_argument("--json", action="store_true", help="print what was stopped where as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    try:
        saved = sweep_service.load_settings(args.run_id, "cancel")
        inventory_path = args.inventory or (saved.inventory if saved else None)
        if not inventory_path:
            raise sweep_service.unknown_run(args.run_id, "cancel")
        limit = args.limit if args.limit is not None else (saved.limit if saved else None)
        extra = args.extra_vars if args.extra_vars is not None else (saved.extra_vars if saved else [])
        request = sweep_service.SweepRequest(
            inventory=ansible_run.load_inventory(inventory_path, limit),
            matrix={},
            matrix_source="",
            run_id=args.run_id,
            command=saved.command if saved else "sweep",
            limit=limit,
            forks=args.forks if args.forks is not None else (saved.forks if saved else None),
            node_results_dir=args.node_results_dir or (saved.node_results_dir if saved else None),
            extra_vars=playbook_options.check_extra_vars(extra),
            verbosity=playbook_options.verbosity(args),
        )
    except (sweep_service.BadInput, ansible_run.InventoryError, playbook_options.ExtraVarsError) as exc:
        print(f"bwtune: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    outcome = sweep_service.stop_outcome(request, ansible_run.private_data_dir(args.run_id))
    for message in outcome.messages():
        print(f"bwtune: {message}", file=sys.stderr)
    resume = outcome.stopped and not outcome.failures
    if resume:
        print(f"resume with: {request.resume_command()}", file=sys.stderr)
    if args.json:
        body = outcome.as_dict()
        body["resume_command"] = request.resume_command() if resume else None
        json.dump(body, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return exit_codes.HOST_FAILED if outcome.failures else exit_codes.OK
