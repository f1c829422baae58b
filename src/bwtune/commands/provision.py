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

from bwtune import ansible_run
from bwtune.commands import _task_playbook as task_playbook

NAME = "provision"
HELP = "Build and verify the SGLang stack on the inventory's hosts (provision.yml); --serve: and serve it."

PROVISION_PLAYBOOK = "provision.yml"
# The playbook's task whose stack_layout result names the stack and why it is new.
FINGERPRINT_TASK = "Work out the stack fingerprint and what differs from the current stack"
# The sgl_kernel role's check-mode note on a host that would take its group builder's wheel.
WHEEL_SOURCE_TASK = "Say where the wheel would come from"
# The playbook's stack_facts of the new stack: its facts fingerprint, the one `bwtune facts` shows.
FACTS_TASK = "Read the new stack's facts"
# stack_layout state=building: the failed attempts it deleted first (`removed`).
BUILDING_TASK = "Record the stack's inputs before building"
# stack_layout state=activate: the old stacks it kept because a process uses them (`kept_in_use`).
ACTIVATE_TASK = "Check the stack against its inputs, mark it verified and make it current"


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


def host_stacks(outcome: ansible_run.PlaybookRun) -> dict[str, dict[str, Any]]:
    """host -> {fingerprint, current, is_current, verified, changes} from the fingerprint task."""
    found = outcome.results("bwtune.sglang.stack_layout", task=FINGERPRINT_TASK)
    keys = ("fingerprint", "current", "is_current", "verified", "changes", "stack_dir")
    stacks = {host: {k: res.get(k) for k in keys} for host, res in sorted(found.items())}
    for host, res in outcome.results("ansible.builtin.debug", task=WHEEL_SOURCE_TASK).items():
        if host in stacks and res.get("msg"):
            stacks[host]["wheel_from"] = " ".join(str(res["msg"]).split())
    for host, res in outcome.results("bwtune.sglang.stack_facts", task=FACTS_TASK).items():
        stack_facts = (res.get("ansible_facts") or {}).get("bwtune_stack") or {}
        if host in stacks and stack_facts.get("fingerprint"):
            stacks[host]["facts_fingerprint"] = stack_facts["fingerprint"]
    for host, res in outcome.results("bwtune.sglang.stack_layout", task=BUILDING_TASK).items():
        if host in stacks and res.get("removed"):
            stacks[host]["removed_failed"] = list(res["removed"])
    for host, res in outcome.results("bwtune.sglang.stack_layout", task=ACTIVATE_TASK).items():
        if host in stacks and res.get("kept_in_use"):
            stacks[host]["kept_in_use"] = dict(res["kept_in_use"])
    return stacks


def notes(host: str, stack: dict[str, Any]) -> list[str]:
    """What else happened to the host's stacks: failed attempts deleted, old stacks kept in use."""
    lines = []
    if stack.get("removed_failed"):
        lines.append(f"{host}: removed failed stack attempts {', '.join(stack['removed_failed'])}")
    for fp, why in sorted((stack.get("kept_in_use") or {}).items()):
        lines.append(
            f"{host}: kept stack {fp} beyond provision_keep: in use ({why}); restart it onto current"
        )
    return lines


def _facts_name(stack: dict[str, Any]) -> str:
    """The other hash of the same stack, labelled: `bwtune facts` and sweep groups use it."""
    found = stack.get("facts_fingerprint")
    return (
        f"; facts fingerprint {found} (installed versions and driver, as bwtune facts shows)" if found else ""
    )


def describe(host: str, stack: dict[str, Any], check: bool, failed: bool) -> str:
    # The stack's name is the hash of its build inputs (its directory under bwtune_stack_root).
    fp = stack.get("fingerprint")
    if stack.get("is_current") and stack.get("verified"):
        return f"{host}: stack {fp} is current, nothing to build{_facts_name(stack)}"
    why = "; ".join(stack.get("changes") or []) or "not verified yet"
    if check:
        verb = "would become current" if stack.get("verified") else "would be built"
        if stack.get("wheel_from"):
            why += f"; {stack['wheel_from']}"
    elif failed:
        verb = f"failed (current stays at {stack.get('current') or 'none'})"
    else:
        verb = "built and current" if not stack.get("verified") else "made current"
        why += _facts_name(stack)
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
        for line in notes(host, stack):
            print(line)
    if code == task_playbook.EXIT_OK and not args.check:
        served = " and serving" if args.serve else ""
        print(f"provisioned{served}: {', '.join(done.outcome.hosts)}")
    return code
