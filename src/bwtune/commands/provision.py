"""`bwtune provision`: build and verify the serving stack on the inventory's hosts."""

from __future__ import annotations

import argparse
import sys

from bwtune import collection, runner
from bwtune.progress import TaskLines

NAME = "provision"
HELP = "Build and verify the SGLang stack on the inventory's hosts (playbooks/provision.yml)."

EXIT_OK, EXIT_HOST_FAILED, EXIT_BAD_INPUT = 0, 1, 2
PROVISION_PLAYBOOK = "provision.yml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--inventory", required=True, help="Ansible inventory (file or directory)")
    parser.add_argument("--limit", help="only these hosts (an Ansible host pattern)")
    parser.add_argument("--forks", type=int, help="hosts Ansible works on at once")
    parser.add_argument("--quiet", action="store_true", help="no per-task progress lines")


def run(args: argparse.Namespace) -> int:
    try:
        inventory = runner.load_inventory(args.inventory, args.limit)
    except runner.InventoryError as exc:
        print(f"bwtune: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    playbook = collection.playbook(PROVISION_PLAYBOOK)
    if not playbook.is_file():
        print(
            f"bwtune: this bwtune has no provision playbook yet ({playbook} is missing); nothing was run",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    with runner.cancel_on_interrupt() as cancel:
        outcome = runner.run_playbook(
            PROVISION_PLAYBOOK,
            inventory,
            {},
            limit=args.limit,
            forks=args.forks,
            on_event=TaskLines(quiet=args.quiet).on_event,
            quiet=True,
            cancel=cancel.event,
        )
    if outcome.canceled:
        print("bwtune: provision cancelled", file=sys.stderr)
        return 130
    for failure in outcome.failures.values():
        print(f"bwtune: {failure.line()}", file=sys.stderr)
    if outcome.error:
        print(f"bwtune: the provision playbook did not run: {outcome.error}", file=sys.stderr)
    if outcome.failures or outcome.rc != 0:
        return EXIT_HOST_FAILED
    print(f"provisioned: {', '.join(outcome.hosts)}")
    return EXIT_OK
