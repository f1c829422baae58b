"""`bwtune promote RUN_ID`: roll a sweep's best config (or a named one) out to the serving hosts.

Only to the hosts of the config's hardware group (bwtune.analysis.hardware_group, its
same_stack grain): the facts playbook first says which hosts of the inventory (or --limit)
have the GPUs (SM; count, model and interconnect where the run kept them) and the stack
fingerprint the config was measured on; the others are left out, each with the reason. Then host by host
(`serial: 1`, playbooks/promote.yml): the server role installs the config, the host must
answer /health_generate and the sweep's correctness prompts, then the next host starts. A
host that fails goes back to the config it ran before and the rollout stops; a host that ran
no config before gets what the promotion made removed again (unit, files, folders, user).

A simulated result (the stand-in's numbers) goes only to simulated hosts (`bwtune_simulated:
true`, which serve the stand-in): for any other host it is refused before anything runs.
`--check` runs the same playbook in Ansible's check mode: per host, the unit, its command line
and the files it would write or create, and nothing written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract as contract
from bwtune import ansible_run, exit_codes, store
from bwtune.analysis.hardware_group import HardwareGroup, Selection, select
from bwtune.app import facts_service
from bwtune.commands import _playbook_options as playbook_options
from bwtune.report.launch import server_args

NAME = "promote"
HELP = "Roll a run's best config (or --config) out to its hardware group's hosts, one by one, with rollback."

PROMOTE_PLAYBOOK = "promote.yml"
FACTS_PLAYBOOK = facts_service.FACTS_PLAYBOOK
RESOLVE_TASK = "Resolve the config to serve"
PROMOTED_TASK = "Promoted"
CHECK_TASK = "Would change"  # check mode: the server role's server_changes
STOP_TASK = "Stop the rollout"
ROLLED_BACK = "rolled back to "  # the words of STOP_TASK's message after a rollback


class BadInput(ValueError):
    """One line, exit 2, nothing touched."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the sweep run whose config to promote")
    parser.add_argument("--config", metavar="ID", help="this config of the run instead of its best")
    playbook_options.add_arguments(parser)
    store.add_db_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no per-host progress lines")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing: say per host what it would change (unit, command line, files)",
    )


@dataclass
class HostOutcome:
    status: str = "not reached"  # promoted | rolled back | failed | not reached | left out
    # --check: would change | unchanged (| failed | not reached | left out)
    changed_flags: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    would: dict[str, Any] | None = None  # --check: the server role's server_changes


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


def measured_group(
    chosen: Mapping[str, Any], run_id: str, gpu_facts: Mapping[str, Any] | None = None
) -> HardwareGroup:
    """The hardware group the config was measured on (its line, and `gpu_facts`: what the run
    kept of its host's GPUs); BadInput when the run did not record its GPU or stack."""
    group = HardwareGroup.of_result(chosen, gpu_facts)
    # GPU count, model and interconnect are compared where known; older runs lack them.
    missing = [what for what in group.missing() if what in ("GPU", "stack fingerprint")]
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


def refuse_simulated(chosen: Mapping[str, Any], run_id: str, inventory: ansible_run.Inventory) -> None:
    """BadInput when a simulated result would go to a host that is not simulated."""
    if not chosen.get("simulated"):
        return
    real = [host for host in inventory.hosts if not inventory.simulated(host)]
    if real:
        raise BadInput(
            f"run {run_id}: config {chosen['id']} has simulated numbers (the stand-in's), and "
            f"{', '.join(real)} {'is' if len(real) == 1 else 'are'} not simulated: a simulated result is "
            "never promoted to a real server. For a demo, promote it to an inventory host with "
            "bwtune_simulated: true (it serves the stand-in; see inventory/local.yml)"
        )


def run(args: argparse.Namespace) -> int:
    try:
        extra_vars = playbook_options.check_extra_vars(args.extra_vars)
        inventory = ansible_run.load_inventory(args.inventory, args.limit)
        if not inventory.hosts:
            raise BadInput(f"inventory {args.inventory}: no hosts{' match --limit' if args.limit else ''}")
        try:
            conn = store.connect_readonly(args.db)
            output = store.build_run_output(conn, args.run_id)
        except store.UnknownRunError as exc:
            raise BadInput(str(exc)) from None
        except store.DB_INPUT_ERRORS as exc:
            raise BadInput(f"results database: {exc}") from None
        chosen = choose_config(output, args.config)
        kept = {host["host"]: host.get("gpu_facts") for host in store.run_hosts(conn, args.run_id)}
        group = measured_group(chosen, args.run_id, kept.get(chosen["host"]))
        refuse_simulated(chosen, args.run_id, inventory)
    except (BadInput, ansible_run.InventoryError, playbook_options.ExtraVarsError) as exc:
        print(f"bwtune: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT

    common = {
        "forks": args.forks,
        "quiet": True,
        "verbosity": playbook_options.verbosity(args),
        "extra_args": playbook_options.extra_vars_args(extra_vars),
    }
    # Which hosts are of the group: their facts now (read-only), as `bwtune facts` gathers them.
    with ansible_run.cancel_on_interrupt() as cancel:
        gathered = ansible_run.run_playbook(
            FACTS_PLAYBOOK, inventory, {}, limit=args.limit, cancel=cancel.event, **common
        )
    if gathered.canceled:
        print("bwtune: promote cancelled; nothing was promoted", file=sys.stderr)
        return exit_codes.CANCELED
    if gathered.error:
        print(f"bwtune: the facts playbook did not run: {gathered.error}", file=sys.stderr)
        return exit_codes.HOST_FAILED
    failed = {host: failure.line() for host, failure in gathered.failures.items()}
    selection = select(group, inventory.hosts, facts_service.host_facts(gathered), failed)
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
        doing = "checking what promoting would change for" if args.check else "promoting"
        print(f"{doing} {chosen['id']} of run {args.run_id} (measured on {chosen['host']}{simulated})")
        print(f"hardware group {group}: {', '.join(selection.hosts)}")

    seen_resolve: set[str] = set()
    # The last failure of each host: a rescued one (the promotion) comes before STOP_TASK's.
    last_failure: dict[str, tuple[str | None, str]] = {}

    def on_event(event: ansible_run.RunnerEvent) -> None:
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
        elif event.task == CHECK_TASK and args.check:
            would = event.res.get("msg")
            outcomes[host].would = would if isinstance(would, dict) else {}
        elif event.task == PROMOTED_TASK and args.check:
            would = outcomes[host].would or {}
            outcomes[host].status = (
                "would change" if would.get("writes") or would.get("creates") else "unchanged"
            )
            if not args.json and not args.quiet:
                print(describe_would(host, outcomes[host]))
        elif event.task == PROMOTED_TASK:
            outcomes[host].status = "promoted"
            if not args.json and not args.quiet:
                print(f"{host}: promoted, healthy and answering correctly")

    with ansible_run.cancel_on_interrupt() as cancel:
        outcome = ansible_run.run_playbook(
            PROMOTE_PLAYBOOK,
            inventory,
            {"promote_config": promotion},
            # Ansible's --limit, narrowed to the group: the hosts are inventory names.
            limit=",".join(selection.hosts),
            on_event=on_event,
            cancel=cancel.event,
            **{**common, "extra_args": [*common["extra_args"], *(["--check"] if args.check else [])]},
        )
    if outcome.canceled:
        if args.check:
            print("bwtune: promote --check cancelled; nothing was written", file=sys.stderr)
            return exit_codes.CANCELED
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
    print_outcome(promotion, group, outcomes, outcome.error, as_json=args.json, check=args.check)
    return code


def describe_would(host: str, result: HostOutcome) -> str:
    """--check: what the host would get, in a few lines."""
    would = result.would or {}
    if result.status == "unchanged":
        return f"{host}: no change (serves this config already)"
    lines = [f"{host}: would change {describe_changes(result.changed_flags)}"]
    lines.append(f"  unit {would.get('unit')}: ExecStart={would.get('exec_start')}")
    for word, key in (("write", "writes"), ("create", "creates")):
        if would.get(key):
            lines.append(f"  would {word}: {', '.join(str(w) for w in would[key])}")
    return "\n".join(lines)


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
    check: bool = False,
) -> None:
    if as_json:
        hosts: dict[str, dict[str, Any]] = {}
        for host, o in sorted(outcomes.items()):
            hosts[host] = {"status": o.status, "changed_flags": o.changed_flags, "message": o.message}
            if check:
                hosts[host]["would"] = o.would
        body = {
            "run_id": promotion["run_id"],
            "config_id": promotion["config_id"],
            "args": promotion["args"],
            "hardware_group": group.as_dict(),
            "check": check,
            "hosts": hosts,
            "error": error,
        }
        json.dump(contract.versioned(body), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    for host, result in sorted(outcomes.items()):
        if result.status in ("promoted", "would change", "unchanged"):
            continue
        line = f"bwtune: host {host} {result.status}"
        # The first line says why; the journal tail that follows is in --json and -v output.
        first = result.message.splitlines()[0] if result.message else ""
        print(line + (f": {first}" if first else ""), file=sys.stderr)
    if error:
        print(f"bwtune: the promote playbook did not run: {error}", file=sys.stderr)
