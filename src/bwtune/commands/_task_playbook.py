"""What `bwtune facts` and `bwtune provision` share: run one playbook, one line per task.

(Not a subcommand: it has no `run`, so `bwtune.cli` passes it over.)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from bwtune import ansible_run, collection, exit_codes
from bwtune.commands import _playbook_options as playbook_options
from bwtune.progress import TaskLines

# Kept for the commands that import them from here; the one definition is bwtune.exit_codes.
EXIT_OK, EXIT_HOST_FAILED, EXIT_BAD_INPUT, EXIT_CANCELED = (
    exit_codes.OK,
    exit_codes.HOST_FAILED,
    exit_codes.BAD_INPUT,
    exit_codes.CANCELED,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    playbook_options.add_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no per-task progress lines")


@dataclass
class TaskPlaybookRun:
    """A finished run, or the exit code that ended it early (bad inventory, Ctrl-C)."""

    exit_code: int
    inventory: ansible_run.Inventory | None = None
    outcome: ansible_run.PlaybookRun | None = None


def run_task_playbook(
    playbook: str, args: argparse.Namespace, what: str, ansible_args: Sequence[str] = ()
) -> TaskPlaybookRun:
    """Run `playbook` with the command's options; `ansible_args` are more ansible-playbook arguments."""
    try:
        extra_vars = playbook_options.check_extra_vars(args.extra_vars)
        inventory = ansible_run.load_inventory(args.inventory, args.limit)
    except (ansible_run.InventoryError, playbook_options.ExtraVarsError) as exc:
        print(f"bwtune: {exc}", file=sys.stderr)
        return TaskPlaybookRun(EXIT_BAD_INPUT)
    path = collection.playbook(playbook)
    if not path.is_file():
        print(
            f"bwtune: this bwtune has no {what} playbook yet ({path} is missing); nothing was run",
            file=sys.stderr,
        )
        return TaskPlaybookRun(EXIT_BAD_INPUT, inventory)
    with ansible_run.cancel_on_interrupt() as cancel:
        outcome = ansible_run.run_playbook(
            playbook,
            inventory,
            {},
            limit=args.limit,
            forks=args.forks,
            on_event=TaskLines(quiet=args.quiet).on_event,
            quiet=True,
            cancel=cancel.event,
            verbosity=playbook_options.verbosity(args),
            extra_args=[*playbook_options.extra_vars_args(extra_vars), *ansible_args],
        )
    if outcome.canceled:
        print(f"bwtune: {what} cancelled", file=sys.stderr)
        return TaskPlaybookRun(EXIT_CANCELED, inventory, outcome)
    return TaskPlaybookRun(EXIT_OK, inventory, outcome)


def report_failures(outcome: ansible_run.PlaybookRun, what: str) -> int:
    """One stderr line per failed host; the exit code the run earns."""
    for failure in outcome.failures.values():
        print(f"bwtune: {failure.line()}", file=sys.stderr)
    if outcome.error:
        print(f"bwtune: the {what} playbook did not run: {outcome.error}", file=sys.stderr)
    failed = bool(outcome.failures) or outcome.rc != 0
    if failed:
        # The lines above are cut to one line each; the whole output of every task is here.
        print(f"bwtune: the run's whole output: {outcome.artifact_dir}", file=sys.stderr)
    return EXIT_HOST_FAILED if failed else EXIT_OK
