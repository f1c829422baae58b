"""`bwtune provision`: build and verify the serving stack on the inventory's hosts.

Runs playbooks/provision.yml (preflight -> CUDA toolkit -> torch -> sgl-kernel -> SGLang ->
facts; docs/provisioning.md); with `--serve` then the checkpoint and the server on the hosts
whose stack became current (serve.yml; docs/serving.md). Per host it says which stack
(fingerprint) the inputs make and why it differs from the current one; with `--check`
nothing is built or changed and that is the whole answer: what would be built, and which
input changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bwtune import runner
from bwtune.commands import _task_playbook as task_playbook

NAME = "provision"
HELP = "Build and verify the SGLang stack on the inventory's hosts (provision.yml); --serve: and serve it."

PROVISION_PLAYBOOK = "provision.yml"
# The playbook's task whose stack_layout result names the stack and why it is new.
FINGERPRINT_TASK = "Work out the stack fingerprint and what differs from the current stack"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    task_playbook.add_arguments(parser)
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing: say per host which stack would be built and which input changed",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="then put the checkpoint on each host and run SGLang there as a service (serve.yml: "
        "bwtune_model_path, the config in server_flags; docs/serving.md)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object with each host's stack")


def host_stacks(outcome: runner.PlaybookRun) -> dict[str, dict[str, Any]]:
    """host -> {fingerprint, current, is_current, verified, changes} from the fingerprint task."""
    found = outcome.results("bwtune.sglang.stack_layout", task=FINGERPRINT_TASK)
    keys = ("fingerprint", "current", "is_current", "verified", "changes", "stack_dir")
    return {host: {k: res.get(k) for k in keys} for host, res in sorted(found.items())}


def describe(host: str, stack: dict[str, Any], check: bool, failed: bool) -> str:
    fp = stack.get("fingerprint")
    if stack.get("is_current") and stack.get("verified"):
        return f"{host}: stack {fp} is current, nothing to build"
    why = "; ".join(stack.get("changes") or []) or "not verified yet"
    if check:
        verb = "would become current" if stack.get("verified") else "would be built"
    elif failed:
        verb = f"failed (current stays at {stack.get('current') or 'none'})"
    else:
        verb = "built and current" if not stack.get("verified") else "made current"
    return f"{host}: stack {fp} {verb}: {why}"


def run(args: argparse.Namespace) -> int:
    ansible_args = ["--check"] if args.check else []
    if args.serve:
        ansible_args += ["-e", json.dumps({"provision_serve": True})]
    done = task_playbook.run_task_playbook(PROVISION_PLAYBOOK, args, "provision", ansible_args)
    if done.outcome is None or done.exit_code:
        return done.exit_code
    code = task_playbook.report_failures(done.outcome, "provision")
    stacks = host_stacks(done.outcome)
    if args.json:
        out = {
            "check": bool(args.check),
            "serve": bool(args.serve),
            "exit_code": code,
            "hosts": {
                host: {
                    **stacks.get(host, {}),
                    "failed": done.outcome.failures[host].line() if host in done.outcome.failures else None,
                }
                for host in done.outcome.hosts
            },
        }
        json.dump(out, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return code
    for host, stack in stacks.items():
        print(describe(host, stack, args.check, host in done.outcome.failures))
    if code == task_playbook.EXIT_OK and not args.check:
        served = " and serving" if args.serve else ""
        print(f"provisioned{served}: {', '.join(done.outcome.hosts)}")
    return code
