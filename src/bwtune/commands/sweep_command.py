"""`bwtune sweep`: run a sweep matrix on every host of an inventory, keep and report the results.

Parse, call, render: the sweep itself (start, resume, attach, collect, exit code) is the
application layer's `bwtune.app.sweep_service`; the outcome is drawn by `_sweep_output`.
"""

from __future__ import annotations

import argparse
import sys

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import ansible_run, exit_codes, store
from bwtune.app.sweep_service import (
    STRATEGIES,
    BadInput,
    NothingToLaunch,
    SweepRequest,
    attach,
    load_matrix,
    load_settings,
    run_sweep,
    saved_matrix,
    unknown_run,
)
from bwtune.commands import _playbook_options as playbook_options
from bwtune.commands._sweep_output import print_outcome

NAME = "sweep"
HELP = "Run a sweep matrix on the inventory's hosts, keep the results and write the reports."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    playbook_options.add_arguments(parser, inventory_required=False)
    parser.add_argument("-m", "--matrix", help="sweep matrix (YAML); with --resume/--attach, the run's own")
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        help="how configs are chosen (default adaptive; a resume keeps the run's); adaptive starts from "
        "what earlier runs of the same GPU measured (the results database)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--resume", metavar="RUN_ID", help="continue this run with its own settings: configs done are kept"
    )
    which.add_argument(
        "--attach",
        metavar="RUN_ID",
        help="follow this run while its nodes still sweep (after the bwtune that started it was killed), "
        "then keep its results; starts nothing",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --resume: measure again the configs the run has already measured; "
        "the database keeps the earlier measurements and bwtune lists what it replaced",
    )
    parser.add_argument(
        "--node-results-dir", help="where nodes keep results files (default: the sweep role's)"
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    try:
        request = request_from_args(args)
        store.check_writable()  # before anything runs: a sweep's results need a home
    except NothingToLaunch as exc:
        print(f"bwtune: {exc}", file=sys.stderr)
        return exit_codes.NOTHING_MEASURED
    except (
        BadInput,
        ansible_run.InventoryError,
        playbook_options.ExtraVarsError,
        store.StorageError,
    ) as exc:
        print(f"bwtune: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    outcome = attach(request) if args.attach else run_sweep(request)
    print_outcome(outcome, as_json=args.json)
    return outcome.exit_code


def request_from_args(args: argparse.Namespace) -> SweepRequest:
    """The sweep's request from its options; a resume or attach fills what is not given from
    the run's saved settings (and matrix)."""
    extra_vars = playbook_options.check_extra_vars(args.extra_vars)
    run_id = args.resume or args.attach
    flag = "--resume" if args.resume else "--attach"
    saved = load_settings(run_id, flag) if run_id else None
    inventory_path = args.inventory or (saved.inventory if saved else None)
    if not inventory_path and run_id:
        raise unknown_run(run_id, flag)
    if not inventory_path:
        raise BadInput("give an inventory with -i INVENTORY")
    limit = args.limit if args.limit is not None else (saved.limit if saved else None)
    inventory = ansible_run.load_inventory(inventory_path, limit)
    if args.matrix:
        matrix, source = load_matrix(args.matrix), str(args.matrix)
    elif run_id:
        matrix, source = saved_matrix(run_id, flag)
    else:
        raise BadInput("give a matrix with -m MATRIX (or --resume RUN_ID)")
    if args.extra_vars is None and saved is not None:
        extra_vars = playbook_options.check_extra_vars(saved.extra_vars)
    return SweepRequest(
        inventory=inventory,
        matrix=matrix,
        matrix_source=source,
        run_id=run_id or ansible_run.new_run_id(),
        command=saved.command if saved else "sweep",
        limit=limit,
        strategy=args.strategy or (saved.strategy if saved else None) or contract.DEFAULT_STRATEGY,
        force=args.force,
        forks=args.forks if args.forks is not None else (saved.forks if saved else None),
        node_results_dir=args.node_results_dir or (saved.node_results_dir if saved else None),
        quiet=args.quiet,
        resumed=bool(run_id),
        node_env=dict(saved.node_env) if saved else {},
        extra_vars=extra_vars,
        verbosity=playbook_options.verbosity(args),
    )
