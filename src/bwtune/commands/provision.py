"""`bwtune provision`: build and verify the serving stack on the inventory's hosts."""

from __future__ import annotations

import argparse

from bwtune.commands import _task_playbook as task_playbook

NAME = "provision"
HELP = "Build and verify the SGLang stack on the inventory's hosts (playbooks/provision.yml)."

PROVISION_PLAYBOOK = "provision.yml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    task_playbook.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    done = task_playbook.run_task_playbook(PROVISION_PLAYBOOK, args, "provision")
    if done.outcome is None or done.exit_code:
        return done.exit_code
    code = task_playbook.report_failures(done.outcome, "provision")
    if code == task_playbook.EXIT_OK:
        print(f"provisioned: {', '.join(done.outcome.hosts)}")
    return code
