"""`bwtune recipe export|sign|verify-signature|check|verify`: a run's config as a recipe file.

The recipe is built, signed, compared and verified by bwtune.recipes (application code);
this module parses the arguments and prints. docs/recipes.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

from bwtune import ansible_run, exit_codes, regression, store
from bwtune.app import facts_service, sweep_service
from bwtune.commands import _playbook_options as playbook_options
from bwtune.recipes import check, model, signing, verify

NAME = "recipe"
HELP = "Export a run's best config as a recipe file; sign it; check or verify it on other hosts."

ACTIONS = ("export", "sign", "verify-signature", "check", "verify")
DEFAULT_LAUNCHES = 3
MAX_LAUNCHES = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="{" + ",".join(ACTIONS) + "}")
    export = actions.add_parser("export", help="write the recipe of a run's best config (or --config)")
    export.add_argument("run_id", metavar="RUN_ID", help="the run (bwtune runs lists them)")
    export.add_argument("--config", metavar="ID", help="this config of the run instead of its best")
    export.add_argument(
        "--host", metavar="HOST", help="with --config: its result on this host (measured on several)"
    )
    export.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="the recipe file to write (JSON)"
    )
    export.add_argument("--sign-key", metavar="KEY", help="also sign it with this SSH private key (FILE.sig)")
    store.add_db_argument(export)

    sign = actions.add_parser("sign", help="sign a recipe with an SSH key (ssh-keygen -Y sign): FILE.sig")
    sign.add_argument("file", metavar="FILE", help="the recipe file")
    sign.add_argument("--key", required=True, metavar="KEY", help="the SSH private key to sign with")

    verify_sig = actions.add_parser(
        "verify-signature", help="check FILE.sig against an allowed-signers file (ssh-keygen -Y verify)"
    )
    verify_sig.add_argument("file", metavar="FILE", help="the recipe file")
    verify_sig.add_argument(
        "--allowed-signers",
        required=True,
        metavar="F",
        help="who may sign (ssh-keygen's allowed_signers format)",
    )
    verify_sig.add_argument(
        "--identity", metavar="I", help="the signer to expect (default: the one F names for the key)"
    )
    verify_sig.add_argument("--signature", metavar="SIG", help="the signature file (default: FILE.sig)")

    check_ = actions.add_parser(
        "check",
        help="per host: the recipe's hardware group? which stack inputs differ? what apply would change",
    )
    check_.add_argument("file", metavar="FILE", help="the recipe file")
    playbook_options.add_arguments(check_)
    check_.add_argument("--json", action="store_true", help="print each host's check as JSON on stdout")

    verify_ = actions.add_parser(
        "verify", help="launch the recipe's config again (a scratch sweep) and compare with its numbers"
    )
    verify_.add_argument("file", metavar="FILE", help="the recipe file")
    playbook_options.add_arguments(verify_)
    verify_.add_argument(
        "--launches", type=int, default=DEFAULT_LAUNCHES,
        help=f"launches of the config (default {DEFAULT_LAUNCHES}; at most {MAX_LAUNCHES})",
    )  # fmt: skip
    verify_.add_argument(
        "--model-path", metavar="PATH", help="the checkpoint on the hosts (default: the recipe's)"
    )
    verify_.add_argument(
        "--node-results-dir", help="where nodes keep results files (default: the sweep role's)"
    )
    verify_.add_argument(
        "--attestation", type=Path, metavar="FILE",
        help="also write the attestation (Markdown) here (default: the scratch run's folder only)",
    )  # fmt: skip
    verify_.add_argument("--json", action="store_true", help="print the verdict as JSON on stdout")
    verify_.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    handler = {
        "export": _export,
        "sign": _sign,
        "verify-signature": _verify_signature,
        "check": _check,
        "verify": _verify,
    }[args.action]
    return handler(args)


def _fail(action: str, message: object, code: int = exit_codes.BAD_INPUT) -> int:
    print(f"bwtune recipe {action}: {message}", file=sys.stderr)
    return code


def _export(args: argparse.Namespace) -> int:
    if args.sign_key and not os.path.isfile(args.sign_key):
        return _fail("export", f"--sign-key {args.sign_key}: no such key file")
    try:
        conn = store.connect_readonly(args.db)
    except (store.SchemaTooNewError, *store.DB_INPUT_ERRORS) as exc:
        return _fail("export", f"results database: {exc}")
    try:
        recipe = model.build(conn, args.run_id, args.config, host=args.host)
    except model.RecipeError as exc:
        return _fail("export", exc)
    finally:
        conn.close()
    try:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(model.dumps(recipe))
    except OSError as exc:
        return _fail("export", f"-o {args.output}: cannot write it ({exc.strerror or exc})")
    measured = recipe["measured"]
    simulated = " (SIMULATED: the stand-in's numbers, not a GPU's)" if recipe["simulated"] else ""
    print(f"recipe: {args.output}: config {measured['config_id']} of run {args.run_id}{simulated}")
    if args.sign_key:
        try:
            print(f"signature: {signing.sign(args.output, args.sign_key)}")
        except signing.SigningError as exc:
            return _fail("export", f"{exc} (the recipe itself is written, unsigned)")
    return exit_codes.OK


def _sign(args: argparse.Namespace) -> int:
    try:
        print(f"signature: {signing.sign(args.file, args.key)}")
    except signing.SigningError as exc:
        return _fail("sign", exc)
    return exit_codes.OK


def _verify_signature(args: argparse.Namespace) -> int:
    try:
        outcome = signing.verify(args.file, args.allowed_signers, args.identity, args.signature)
    except signing.SigningError as exc:
        return _fail("verify-signature", exc)
    if not outcome.ok:
        return _fail("verify-signature", outcome.message, exit_codes.NOT_VERIFIED)
    print(outcome.message)
    return exit_codes.OK


def _inventory(
    args: argparse.Namespace, action: str
) -> tuple[dict[str, Any], ansible_run.Inventory, list[str]]:
    """The recipe, the inventory and the checked -e values; ValueError subclasses on bad input."""
    recipe = model.load(args.file)
    extra_vars = playbook_options.check_extra_vars(args.extra_vars)
    inventory = ansible_run.load_inventory(args.inventory, args.limit)
    if not inventory.hosts:
        raise model.RecipeError(
            f"inventory {args.inventory}: no hosts{' match --limit' if args.limit else ''}"
        )
    check.refuse_simulated(recipe, args.file, inventory)
    return recipe, inventory, extra_vars


BAD_INPUTS = (model.RecipeError, check.Refused, ansible_run.InventoryError, playbook_options.ExtraVarsError)


def _check(args: argparse.Namespace) -> int:
    try:
        recipe, inventory, extra_vars = _inventory(args, "check")
    except BAD_INPUTS as exc:
        return _fail("check", exc)
    # The hosts' facts now, read-only, as `bwtune facts` gathers them.
    with ansible_run.cancel_on_interrupt() as cancel:
        gathered = ansible_run.run_playbook(
            facts_service.FACTS_PLAYBOOK, inventory, {}, limit=args.limit, forks=args.forks, quiet=True,
            cancel=cancel.event, verbosity=playbook_options.verbosity(args),
            extra_args=playbook_options.extra_vars_args(extra_vars),
        )  # fmt: skip
    if gathered.canceled:
        return _fail("check", "cancelled", exit_codes.CANCELED)
    if gathered.error:
        return _fail("check", f"the facts playbook did not run: {gathered.error}", exit_codes.HOST_FAILED)
    failed = {host: failure.line() for host, failure in gathered.failures.items()}
    checks = check.check_hosts(recipe, inventory.hosts, facts_service.host_facts(gathered), failed)
    if args.json:
        print(json.dumps({"recipe": args.file, "hosts": [c.to_dict() for c in checks]}, indent=2))
    else:
        measured = recipe["measured"]
        simulated = " (simulated numbers)" if recipe["simulated"] else ""
        print(
            f"recipe {args.file}: config {measured['config_id']} of run {measured['run_id']}{simulated}; "
            f"hardware group {check.group_of(recipe)}; nothing was changed"
        )
        for one in checks:
            print("\n".join(check.describe(one)))
    if failed:
        return exit_codes.HOST_FAILED
    return exit_codes.OK if all(c.in_group and not c.differ for c in checks) else exit_codes.NOT_VERIFIED


def _verify(args: argparse.Namespace) -> int:
    try:
        if not 1 <= args.launches <= MAX_LAUNCHES:
            raise model.RecipeError(f"--launches {args.launches}: between 1 and {MAX_LAUNCHES}")
        recipe, inventory, extra_vars = _inventory(args, "verify")
        matrix = verify.matrix_of(recipe, args.model_path)
        store.check_writable()
    except (*BAD_INPUTS, store.StorageError) as exc:
        return _fail("verify", exc)
    request = sweep_service.SweepRequest(
        inventory=inventory,
        matrix=matrix,
        matrix_source=f"recipe {args.file}",
        run_id=ansible_run.new_run_id(),
        limit=args.limit,
        strategy="grid",  # the one config, every launch
        forks=args.forks,
        node_results_dir=args.node_results_dir,
        quiet=args.quiet,
        extra_vars=extra_vars,
        verbosity=playbook_options.verbosity(args),
    )
    for number in range(1, args.launches + 1):
        if not args.quiet:
            print(
                f"bwtune recipe verify: launch {number}/{args.launches} (run {request.run_id})",
                file=sys.stderr,
            )
        step = request if number == 1 else dataclasses.replace(request, resumed=True, force=True)
        try:
            outcome = sweep_service.run_sweep(step)
        except sweep_service.BadInput as exc:  # e.g. nothing to launch: every config pruned on these hosts
            return _fail("verify", f"could not run: {exc}", exit_codes.NOTHING_MEASURED)
        for message in outcome.messages:
            if not message.startswith("replaced: "):
                print(f"bwtune recipe verify: {message}", file=sys.stderr)
        if outcome.exit_code == exit_codes.CANCELED:
            return exit_codes.CANCELED
        if outcome.exit_code not in (exit_codes.OK, exit_codes.NOTHING_MEASURED):
            return _fail(
                "verify",
                f"could not run: launch {number}/{args.launches} of run {request.run_id} failed "
                f"(sweep exit {outcome.exit_code}); no verdict",
                exit_codes.HOST_FAILED,
            )
    conn = store.connect()
    try:
        store.tag_run(conn, request.run_id, verify.TAG)
        result = verify.judge(conn, recipe, request.run_id, regression.DEFAULT_SETTINGS)
        hosts = store.run_hosts(conn, request.run_id)
    finally:
        conn.close()
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    simulated_hosts = all(inventory.simulated(host) for host in inventory.hosts)
    if simulated_hosts and not recipe["simulated"]:
        mismatch = (
            "the recipe's numbers are real and these hosts serve the stand-in: "
            "the comparison is not a verification"
        )
        result.note = "; ".join(filter(None, [mismatch, result.note]))
    text = verify.attestation(recipe, args.file, result, hosts, simulated_hosts=simulated_hosts, when=when)
    written = [store.run_dir(request.run_id) / "attestation.md"]
    if args.attestation:
        written.append(args.attestation)
    for path in written:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if args.json:
        body = dataclasses.asdict(result)
        print(json.dumps({**body, "attestation": [str(p) for p in written]}, indent=2))
    else:
        print(f"{args.file}: {result.line}")
        if result.differ:
            differ = "; ".join(
                f"{d['words']} {d['host'] or 'none'} (recipe {d['recipe']})" for d in result.differ
            )
            print(f"stack inputs that differ from the recipe's: {differ}")
        if result.note:
            print(f"note: {result.note}")
        for path in written:
            print(f"attestation: {path}")
    return {
        verify.REPRODUCED: exit_codes.OK,
        verify.FASTER: exit_codes.OK,
        verify.SLOWER: exit_codes.REGRESSION,
        verify.INCONCLUSIVE: exit_codes.NOT_VERIFIED,
        verify.COULD_NOT_RUN: exit_codes.NOTHING_MEASURED,
    }[result.verdict]
