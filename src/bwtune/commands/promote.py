"""`bwtune promote RUN_ID`: roll a sweep's best config (or a named one) out to the serving hosts.

Only to the hosts of the config's hardware group (bwtune.hardware_group): the facts playbook
first says which hosts of the inventory (or --limit) have the GPU and stack fingerprint the
config was measured on; the others are left out, each with the reason. Then host by host
(`serial: 1`, playbooks/promote.yml): the server role installs the config, the host must
answer /health_generate and the sweep's correctness prompts, then the next host starts. A
host that fails goes back to the config it ran before and the rollout stops.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract as contract
from bwtune import exit_codes, results_db, runner
from bwtune.commands import _playbook_options as playbook_options
from bwtune.commands import facts as facts_command
from bwtune.hardware_group import HardwareGroup, Selection, select
from bwtune.report.launch import server_args

NAME = "promote"
HELP = "Roll a run's best config (or --config) out to its hardware group's hosts, one by one, with rollback."

PROMOTE_PLAYBOOK = "promote.yml"
FACTS_PLAYBOOK = facts_command.FACTS_PLAYBOOK
RESOLVE_TASK = "Resolve the config to serve"
PROMOTED_TASK = "Promoted"
STOP_TASK = "Stop the rollout"
ROLLED_BACK = "rolled back to "  # the words of STOP_TASK's message after a rollback


class BadInput(ValueError):
    """One line, exit 2, nothing touched."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the sweep run whose config to promote")
    parser.add_argument("--config", metavar="ID", help="this config of the run instead of its best")
    playbook_options.add_arguments(parser)
    results_db.add_db_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no per-host progress lines")


@dataclass
class HostOutcome:
    status: str = "not reached"  # promoted | rolled back | failed | not reached | left out
    changed_flags: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""


def choose_config(output: Mapping[str, Any], config_id: str | None) -> Mapping[str, Any]:
    """The result to promote: the named config's ok result, else the run's best."""
    run_id = output["run_id"]
    if config_id is None:
        best = output.get("best")
        if best is None:
            raise BadInput(f"run {run_id} has no config that measured ok: nothing to promote")
        return best
    rows = [r for r in output["results"] if r["id"] == config_id]
    if not rows:
        raise BadInput(f"--config {config_id}: no such config in run {run_id}")
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        raise BadInput(
            f"--config {config_id}: status {rows[0]['status']} in run {run_id}, not a config that served"
        )
    return ok[0]


def measured_group(chosen: Mapping[str, Any], run_id: str) -> HardwareGroup:
    """The hardware group the config was measured on; BadInput when the run did not record it."""
    group = HardwareGroup.of_result(chosen)
    missing = group.missing()
    if missing:
        raise BadInput(
            f"run {run_id}: config {chosen['id']} (measured on {chosen['host']}) records no "
            f"{' and no '.join(missing)}: cannot tell which hosts it holds for"
        )
    return group


def nobody_line(selection: Selection, chosen: Mapping[str, Any], run_id: str, where: str) -> str:
    """The one line for an inventory with no host of the config's hardware group."""
    why = "; ".join(f"{host}: {reason}" for host, reason in selection.left_out.items())
    return (
        f"no host of {where} is in the hardware group of config {chosen['id']} of run {run_id} "
        f"({selection.group}); nothing was promoted. {why}"
    )


def run(args: argparse.Namespace) -> int:
    try:
        extra_vars = playbook_options.check_extra_vars(args.extra_vars)
        inventory = runner.load_inventory(args.inventory, args.limit)
        if not inventory.hosts:
            raise BadInput(f"inventory {args.inventory}: no hosts{' match --limit' if args.limit else ''}")
        try:
            conn = results_db.connect(args.db, create=False)
            output = results_db.build_run_output(conn, args.run_id)
        except results_db.UnknownRunError as exc:
            raise BadInput(str(exc)) from None
        except results_db.DB_INPUT_ERRORS as exc:
            raise BadInput(f"results database: {exc}") from None
        chosen = choose_config(output, args.config)
        group = measured_group(chosen, args.run_id)
    except (BadInput, runner.InventoryError, playbook_options.ExtraVarsError) as exc:
        print(f"bwtune: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT

    common = {
        "forks": args.forks,
        "quiet": True,
        "verbosity": playbook_options.verbosity(args),
        "extra_args": playbook_options.extra_vars_args(extra_vars),
    }
    # Which hosts are of the group: their facts now (read-only), as `bwtune facts` gathers them.
    with runner.cancel_on_interrupt() as cancel:
        gathered = runner.run_playbook(
            FACTS_PLAYBOOK, inventory, {}, limit=args.limit, cancel=cancel.event, **common
        )
    if gathered.canceled:
        print("bwtune: promote cancelled; nothing was promoted", file=sys.stderr)
        return exit_codes.CANCELED
    if gathered.error:
        print(f"bwtune: the facts playbook did not run: {gathered.error}", file=sys.stderr)
        return exit_codes.HOST_FAILED
    failed = {host: failure.line() for host, failure in gathered.failures.items()}
    selection = select(group, inventory.hosts, facts_command.host_facts(gathered), failed)
    if not selection.hosts:
        where = f"inventory {args.inventory}" + (f" (--limit {args.limit})" if args.limit else "")
        print(f"bwtune: {nobody_line(selection, chosen, args.run_id, where)}", file=sys.stderr)
        return exit_codes.HOST_FAILED if selection.unknown else exit_codes.BAD_INPUT

    promotion = {"args": server_args(chosen), "config_id": chosen["id"], "run_id": args.run_id}
    outcomes = {host: HostOutcome() for host in selection.hosts}
    for host, reason in selection.left_out.items():
        outcomes[host] = HostOutcome(status="left out", message=reason)
    if not args.json and not args.quiet:
        simulated = " (simulated numbers)" if chosen.get("simulated") else ""
        print(f"promoting {chosen['id']} of run {args.run_id} (measured on {chosen['host']}{simulated})")
        print(f"hardware group {group}: {', '.join(selection.hosts)}")

    seen_resolve: set[str] = set()
    # The last failure of each host: a rescued one (the promotion) comes before STOP_TASK's.
    last_failure: dict[str, tuple[str | None, str]] = {}

    def on_event(event: runner.RunnerEvent) -> None:
        host = event.host
        if host is None or host not in outcomes:
            return
        if event.kind == "failed":
            last_failure[host] = (event.task, str(event.res.get("msg") or "failed"))
        if event.kind != "ok":
            return
        if event.task == RESOLVE_TASK and host not in seen_resolve:  # the promotion's; a rollback's is second
            seen_resolve.add(host)
            outcomes[host].changed_flags = list(event.res.get("changed_flags") or [])
            if not args.json and not args.quiet:
                print(f"{host}: {describe_changes(outcomes[host].changed_flags)}")
        elif event.task == PROMOTED_TASK:
            outcomes[host].status = "promoted"
            if not args.json and not args.quiet:
                print(f"{host}: promoted, healthy and answering correctly")

    with runner.cancel_on_interrupt() as cancel:
        outcome = runner.run_playbook(
            PROMOTE_PLAYBOOK,
            inventory,
            {"promote_config": promotion},
            # Ansible's --limit, narrowed to the group: the hosts are inventory names.
            limit=",".join(selection.hosts),
            on_event=on_event,
            cancel=cancel.event,
            **common,
        )
    if outcome.canceled:
        print("bwtune: promote cancelled; hosts already promoted keep the new config", file=sys.stderr)
        return exit_codes.CANCELED
    for host, failure in outcome.failures.items():
        result = outcomes.setdefault(host, HostOutcome())
        task, message = last_failure.get(host, (failure.task, failure.message))
        rolled_back = task == STOP_TASK and ROLLED_BACK in message
        result.status = "rolled back" if rolled_back else "failed"
        result.message = message
    code = exit_codes.OK
    if outcome.failures or outcome.rc != 0 or selection.unknown:
        code = exit_codes.HOST_FAILED
    print_outcome(promotion, group, outcomes, outcome.error, as_json=args.json)
    return code


def describe_changes(changes: list[dict[str, Any]]) -> str:
    if not changes:
        return "no flag changes"
    words = []
    for change in changes:
        old = "unset" if change["old"] is None else change["old"]
        new = "unset" if change["new"] is None else change["new"]
        words.append(f"--{change['flag']} {old} -> {new}")
    return "; ".join(words)


def print_outcome(
    promotion: Mapping[str, Any],
    group: HardwareGroup,
    outcomes: Mapping[str, HostOutcome],
    error: str | None,
    *,
    as_json: bool,
) -> None:
    if as_json:
        body = {
            "run_id": promotion["run_id"],
            "config_id": promotion["config_id"],
            "args": promotion["args"],
            "hardware_group": group.as_dict(),
            "hosts": {
                host: {"status": o.status, "changed_flags": o.changed_flags, "message": o.message}
                for host, o in sorted(outcomes.items())
            },
            "error": error,
        }
        json.dump(contract.versioned(body), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    for host, result in sorted(outcomes.items()):
        if result.status == "promoted":
            continue
        line = f"bwtune: host {host} {result.status}"
        # The first line says why; the journal tail that follows is in --json and -v output.
        first = result.message.splitlines()[0] if result.message else ""
        print(line + (f": {first}" if first else ""), file=sys.stderr)
    if error:
        print(f"bwtune: the promote playbook did not run: {error}", file=sys.stderr)
