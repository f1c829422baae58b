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
and the files it would write or create, and nothing written. After a promotion it prints the
`bwtune recipe export` command of the config now serving (issue 27).

The rollout itself (the facts run, promote.yml, each host's outcome) is
bwtune.app.promote_service's, shared with `bwtune recipe apply`; this module chooses the
config, refuses what may not be promoted and prints.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import ansible_run, exit_codes, store
from bwtune.analysis.hardware_group import HardwareGroup, Selection, select
from bwtune.app import promote_service
from bwtune.app.promote_service import HostOutcome, describe_changes, describe_would
from bwtune.commands import _playbook_options as playbook_options
from bwtune.report.launch import server_args

NAME = "promote"
HELP = "Roll a run's best config (or --config) out to its hardware group's hosts, one by one, with rollback."

# The playbooks and the tasks the rollout watches (bwtune.app.promote_service's).
PROMOTE_PLAYBOOK = promote_service.PROMOTE_PLAYBOOK
FACTS_PLAYBOOK = promote_service.FACTS_PLAYBOOK
RESOLVE_TASK = promote_service.RESOLVE_TASK
PROMOTED_TASK = promote_service.PROMOTED_TASK
CHECK_TASK = promote_service.CHECK_TASK
STOP_TASK = promote_service.STOP_TASK
ROLLED_BACK = promote_service.ROLLED_BACK


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

    options = promote_service.PlaybookOptions(
        forks=args.forks,
        verbosity=playbook_options.verbosity(args),
        extra_args=playbook_options.extra_vars_args(extra_vars),
    )
    # Which hosts are of the group: their facts now (read-only), as `bwtune facts` gathers them.
    gathered = promote_service.gather_facts(inventory, args.limit, options)
    if gathered.canceled:
        print("bwtune: promote cancelled; nothing was promoted", file=sys.stderr)
        return exit_codes.CANCELED
    if gathered.error:
        print(f"bwtune: the facts playbook did not run: {gathered.error}", file=sys.stderr)
        return exit_codes.HOST_FAILED
    selection = select(group, inventory.hosts, gathered.facts, gathered.failed)
    if not selection.hosts:
        where = f"inventory {args.inventory}" + (f" (--limit {args.limit})" if args.limit else "")
        print(f"bwtune: {nobody_line(selection, chosen, args.run_id, where)}", file=sys.stderr)
        return exit_codes.HOST_FAILED if selection.unknown else exit_codes.BAD_INPUT

    promotion = promote_service.promotion(server_args(chosen), chosen["id"], args.run_id)
    talk = not args.json and not args.quiet
    if talk:
        simulated = " (simulated numbers)" if chosen.get("simulated") else ""
        doing = "checking what promoting would change for" if args.check else "promoting"
        print(f"{doing} {chosen['id']} of run {args.run_id} (measured on {chosen['host']}{simulated})")
        print(f"hardware group {group}: {', '.join(selection.hosts)}")

    rollout = promote_service.Rollout(inventory, selection.hosts, promotion, args.check, options)
    result = promote_service.roll_out(rollout, progress_printer() if talk else None)
    if result.canceled:
        if args.check:
            print("bwtune: promote --check cancelled; nothing was written", file=sys.stderr)
            return exit_codes.CANCELED
        print("bwtune: promote cancelled; hosts already promoted keep the new config", file=sys.stderr)
        return exit_codes.CANCELED
    outcomes = dict(result.outcomes)
    for host, reason in selection.left_out.items():
        outcomes[host] = HostOutcome(status="left out", message=reason)
    code = exit_codes.OK
    if result.failed or selection.unknown:
        code = exit_codes.HOST_FAILED
    print_outcome(promotion, group, outcomes, result.error, as_json=args.json, check=args.check)
    promoted = [host for host, o in result.outcomes.items() if o.status == "promoted"]
    if talk and promoted and not args.check:
        # The config that now serves, as a file another node can check (bwtune recipe, issue 27).
        print(f"share it as a recipe: {export_command(args, chosen)}")
    return code


def export_command(args: argparse.Namespace, chosen: Mapping[str, Any]) -> str:
    """The `bwtune recipe export` command of the promoted config."""
    words = ["bwtune", "recipe", "export", args.run_id, "--config", str(chosen["id"])]
    secret_db = isinstance(args.db, store.DatabaseURL) and args.db.masked != args.db.url
    if args.db and not secret_db:
        words += ["--db", str(args.db)]
    words += ["-o", f"{chosen['id']}.recipe.json"]
    # A store URL with a password is never printed, and its masked text would not connect.
    note = f"  # with --db {args.db} (its password as you gave it)" if secret_db else ""
    return shlex.join(words) + note


def progress_printer() -> Callable[[str, str, HostOutcome], None]:
    """The per-host progress lines of a rollout."""

    def show(host: str, stage: str, outcome: HostOutcome) -> None:
        if stage == promote_service.RESOLVED:
            print(f"{host}: {describe_changes(outcome.changed_flags)}")
        elif stage == promote_service.WOULD:
            print(describe_would(host, outcome))
        elif stage == promote_service.PROMOTED:
            print(f"{host}: promoted, healthy and answering correctly")

    return show


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
    for line in promote_service.failure_lines(outcomes):
        print(f"bwtune: {line}", file=sys.stderr)
    if error:
        print(f"bwtune: the promote playbook did not run: {error}", file=sys.stderr)
