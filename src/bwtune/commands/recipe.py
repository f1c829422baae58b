"""`bwtune recipe export|sign|verify-signature|check|apply|verify`: a run's config as a recipe file.

The recipe is built, signed, compared and verified by bwtune.recipes (application code);
`apply` brings the recipe's config into service through bwtune.app.promote_service, the
rollout `bwtune promote` uses; this module parses the arguments and prints. docs/recipes.md.
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
from bwtune.app import facts_service, promote_service, recipe_service, sweep_service
from bwtune.commands import _playbook_options as playbook_options
from bwtune.recipes import apply, check, recipe_file, signing, verify

NAME = "recipe"
HELP = "Export a run's best config as a recipe file; sign it; check or verify it on other hosts."

ACTIONS = ("export", "sign", "verify-signature", "check", "apply", "verify")
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

    apply_ = actions.add_parser(
        "apply",
        help="serve the recipe's config on its hardware group's hosts, one by one, with rollback",
    )
    apply_.add_argument("file", metavar="FILE", help="the recipe file")
    playbook_options.add_arguments(apply_)
    apply_.add_argument(
        "--check",
        action="store_true",
        help="write nothing: say per host what it would change (stack inputs, unit, command line, files)",
    )
    apply_.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    apply_.add_argument("--quiet", action="store_true", help="no per-host progress lines")

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
    verify_.add_argument(
        "--apply-stack", action="store_true",
        help="where a stack input differs, build the recipe's stack (a scratch one, not current) and "
        "launch from it",
    )  # fmt: skip
    verify_.add_argument("--json", action="store_true", help="print the verdict as JSON on stdout")
    verify_.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    handler = {
        "export": _export,
        "sign": _sign,
        "verify-signature": _verify_signature,
        "check": _check,
        "apply": _apply,
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
        recipe = recipe_file.build(conn, args.run_id, args.config, host=args.host)
    except recipe_file.RecipeError as exc:
        return _fail("export", exc)
    finally:
        conn.close()
    try:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(recipe_file.dumps(recipe))
    except OSError as exc:
        return _fail("export", f"-o {args.output}: cannot write it ({exc.strerror or exc})")
    measured = recipe["measured"]
    simulated = " (SIMULATED: the stand-in's numbers, not a GPU's)" if recipe["simulated"] else ""
    print(f"recipe: {args.output}: config {measured['config_id']} of run {args.run_id}{simulated}")
    if args.sign_key:
        try:
            print(f"signature: {signing.sign(args.output, args.sign_key, '--sign-key')}")
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
    recipe = recipe_file.load(args.file)
    extra_vars = playbook_options.check_extra_vars(args.extra_vars)
    inventory = ansible_run.load_inventory(args.inventory, args.limit)
    if not inventory.hosts:
        raise recipe_file.RecipeError(
            f"inventory {args.inventory}: no hosts{' match --limit' if args.limit else ''}"
        )
    doing = "applied" if action == "apply" else "checked and verified"
    check.refuse_simulated(recipe, args.file, inventory, doing)
    return recipe, inventory, extra_vars


BAD_INPUTS = (
    recipe_file.RecipeError,
    check.Refused,
    ansible_run.InventoryError,
    playbook_options.ExtraVarsError,
)


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


def _apply(args: argparse.Namespace) -> int:
    try:
        recipe, inventory, extra_vars = _inventory(args, "apply")
        server_args = apply.server_args(recipe, args.file)
    except BAD_INPUTS as exc:
        return _fail("apply", exc)
    options = promote_service.PlaybookOptions(
        forks=args.forks,
        verbosity=playbook_options.verbosity(args),
        extra_args=playbook_options.extra_vars_args(extra_vars),
    )
    gathered = promote_service.gather_facts(inventory, args.limit, options)
    if gathered.canceled:
        return _fail("apply", "cancelled; nothing was applied", exit_codes.CANCELED)
    if gathered.error:
        return _fail("apply", f"the facts playbook did not run: {gathered.error}", exit_codes.HOST_FAILED)
    planned = apply.plan(recipe, inventory.hosts, gathered.facts, gathered.failed)
    measured = recipe["measured"]
    group = check.group_of(recipe)
    inputs = apply.build_vars(recipe)
    talk = not args.json and not args.quiet
    if not planned.hosts:
        where = f"inventory {args.inventory}" + (f" (--limit {args.limit})" if args.limit else "")
        why = "; ".join(f"{host}: {reason}" for host, reason in planned.left_out.items())
        code = exit_codes.HOST_FAILED if planned.unknown else exit_codes.BAD_INPUT
        return _fail(
            "apply",
            f"no host of {where} is in the hardware group of {args.file} ({group}); nothing was "
            f"applied. {why}",
            code,
        )

    if talk:
        simulated = " (simulated numbers)" if recipe["simulated"] else ""
        doing = "checking what applying would change for" if args.check else "applying"
        print(f"{doing} {args.file}: config {measured['config_id']} of run {measured['run_id']}{simulated}")
        print(f"hardware group {group}: {', '.join(planned.hosts)}")
        if args.check:
            for one in planned.checks:
                print("\n".join(check.describe(one)))
    outcomes: dict[str, promote_service.HostOutcome] = {}
    # The stack (where its inputs differ) and the checkpoint (where the recipe pins one).
    pinned_checkpoint = apply.checkpoint_vars(recipe)
    steps = recipe_service.prepare(
        recipe_service.StepsRequest(
            inventory,
            recipe,
            build_hosts=list(planned.needs_build),
            checkpoint_hosts=list(planned.hosts) if pinned_checkpoint else [],
            check=args.check,
            options=options,
        )
    )
    if steps.canceled:
        return _fail("apply", "cancelled while building the recipe's stack", exit_codes.CANCELED)
    if steps.error:
        return _fail("apply", f"the recipe_apply playbook did not run: {steps.error}", exit_codes.HOST_FAILED)
    if talk:
        _print_steps(recipe, planned, steps, inputs, pinned_checkpoint, args.check)
    for host, why in steps.failed.items():
        outcomes[host] = promote_service.HostOutcome(status="failed", message=why)
    pythons = {h: p for h, p in steps.pythons().items() if h in planned.needs_build}
    serve = [h for h in planned.hosts if h not in steps.failed]
    built = [h for h in planned.needs_build if h in serve]
    if built and not args.check:
        # The built stacks' facts: a host is served once its stack has the recipe's inputs.
        again = promote_service.gather_facts(
            inventory,
            ",".join(built),
            dataclasses.replace(
                options,
                extra_args=[
                    *options.extra_args,
                    *recipe_service.stack_python_vars(pythons, "bwtune_stack_python"),
                ],
            ),
        )
        for host in built:
            still = (
                [{"words": "facts", "recipe": "-", "host": again.failed.get(host) or again.error}]
                if host in again.failed or again.error
                else apply.built_stack_matches(recipe, again.facts.get(host) or {})
            )
            if still:
                serve.remove(host)
                outcomes[host] = promote_service.HostOutcome(
                    status="failed",
                    message="its stack was built but still differs from the recipe's: "
                    + "; ".join(f"{d['words']} {d['host'] or 'none'} (recipe {d['recipe']})" for d in still),
                )
    result = promote_service.RolloutResult({})
    if serve:
        promotion = promote_service.promotion(
            server_args, str(measured["config_id"]), str(measured["run_id"])
        )
        served_options = dataclasses.replace(
            options,
            extra_args=[*options.extra_args, *recipe_service.stack_python_vars(pythons, "server_python")],
        )
        rollout = promote_service.Rollout(inventory, serve, promotion, args.check, served_options)
        result = promote_service.roll_out(rollout, _apply_progress(args.check, steps) if talk else None)
    if result.canceled:
        if args.check:
            return _fail("apply", "--check cancelled; nothing was written", exit_codes.CANCELED)
        return _fail("apply", "cancelled; hosts already done keep the recipe's config", exit_codes.CANCELED)
    outcomes.update(result.outcomes)
    for host, reason in planned.left_out.items():
        outcomes[host] = promote_service.HostOutcome(status="left out", message=reason)
    changed = {
        host: bool(o.changed or (host in steps.hosts and steps.hosts[host].changed))
        for host, o in outcomes.items()
    }
    if args.json:
        hosts: dict[str, dict[str, Any]] = {}
        checks = {c.host: c for c in planned.checks}
        for host, o in sorted(outcomes.items()):
            step = steps.hosts.get(host)
            hosts[host] = {
                "status": o.status,
                "changed": changed[host],
                "changed_flags": o.changed_flags,
                "message": o.message,
                "stack_differs": checks[host].differ if host in checks else [],
                "stack": None
                if step is None or step.stack is None
                else {
                    "fingerprint": step.stack,
                    "python": step.python,
                    "simulated": step.simulated,
                    "changed": step.changed,
                },
                "checkpoint": bool(step and step.checkpoint),
            }
            if args.check:
                hosts[host]["would"] = o.would
        body = {
            "recipe": args.file,
            "run_id": measured["run_id"],
            "config_id": measured["config_id"],
            "simulated": recipe["simulated"],
            "args": server_args,
            "hardware_group": group.as_dict(),
            "check": args.check,
            "changed": any(changed.values()),
            "hosts": hosts,
            "provision": {"hosts": planned.needs_build, "extra_vars": inputs},
            "checkpoint": pinned_checkpoint or None,
            "error": result.error,
        }
        print(json.dumps(body, indent=2))
    else:
        for line in promote_service.failure_lines(outcomes):
            print(f"bwtune recipe apply: {line}", file=sys.stderr)
        if result.error:
            print(f"bwtune recipe apply: the promote playbook did not run: {result.error}", file=sys.stderr)
        if talk and not args.check and not any(changed.values()) and not steps.failed and not result.failed:
            print(
                f"nothing changed: {', '.join(serve)} had the recipe's stack, checkpoint and config already"
            )
    if result.failed or planned.unknown or steps.failed or len(serve) < len(planned.hosts):
        return exit_codes.HOST_FAILED
    return exit_codes.OK


def _print_steps(
    recipe: dict[str, Any],
    planned: apply.Plan,
    steps: recipe_service.StepsResult,
    inputs: dict[str, Any],
    pinned_checkpoint: dict[str, Any],
    check_mode: bool,
) -> None:
    """Per host: what became (with --check: would become) of its stack and checkpoint."""
    same = [host for host in planned.hosts if host not in planned.needs_build]
    if same:
        print(f"stack: the recipe's already on {', '.join(same)} (nothing to build)")
    for host in planned.needs_build:
        step = steps.hosts.get(host)
        if step is not None and not step.failed:
            kind = "simulated stack" if step.simulated else "stack"
            pinned = ", ".join(f"{k}={v}" for k, v in inputs.items())
            if not step.changed:
                print(f"{host}: {kind} {step.stack}: in place, nothing to build")
            else:
                verb = "would be built" if check_mode else "built"
                print(f"{host}: {kind} {step.stack} {verb} with the recipe's pinned inputs ({pinned})")
            if step.simulated:
                missing = recipe_service.not_simulated_parts(recipe)
                if missing:
                    print(f"  not simulated (no code is built for the stand-in): {', '.join(missing)}")
    if not pinned_checkpoint:
        print(
            "checkpoint: the recipe records no revision or shard hashes: each host's "
            "bwtune_model_path is served as it is"
        )
        return
    for host in planned.hosts:
        step = steps.hosts.get(host)
        if step is not None and not step.failed:
            state = "fetched and verified" if not check_mode else "would be fetched and verified"
            revision = pinned_checkpoint.get("revision") or "its own revision"
            shards = len(pinned_checkpoint.get("shards") or {})
            print(
                f"{host}: checkpoint at revision {revision} {state}"
                + (f", {shards} shard hashes the recipe's" if shards else "")
                + ("" if step.changed or check_mode else " (in place)")
            )


def _apply_progress(check_mode: bool, steps: recipe_service.StepsResult) -> Any:
    def show(host: str, stage: str, outcome: promote_service.HostOutcome) -> None:
        if stage == promote_service.RESOLVED and not check_mode:  # --check: in WOULD's lines
            print(f"{host}: {promote_service.describe_changes(outcome.changed_flags)}")
        elif stage == promote_service.WOULD:
            print(promote_service.describe_would(host, outcome))
        elif stage == promote_service.PROMOTED and not outcome.changed:
            print(f"{host}: no change: serves the recipe's config already, healthy and answering correctly")
        elif stage == promote_service.PROMOTED:
            print(f"{host}: serves the recipe's config, healthy and answering correctly")

    return show


def _scratch_stack(
    args: argparse.Namespace, recipe: dict[str, Any], inventory: ansible_run.Inventory, extra_vars: list[str]
) -> dict[str, str] | int:
    """verify --apply-stack: where a stack input differs, the recipe's stack built into its own
    fingerprinted folder (not `current`); host -> its Python, or the exit code."""
    options = promote_service.PlaybookOptions(
        forks=args.forks,
        verbosity=playbook_options.verbosity(args),
        extra_args=playbook_options.extra_vars_args(extra_vars),
    )
    gathered = promote_service.gather_facts(inventory, args.limit, options)
    if gathered.canceled:
        return exit_codes.CANCELED
    if gathered.error or gathered.failed:
        why = gathered.error or "; ".join(gathered.failed.values())
        return _fail(
            "verify", f"could not run: the hosts' facts could not be gathered ({why})", exit_codes.HOST_FAILED
        )
    differ = {
        host: [
            d
            for d in check.stack_differences(recipe, gathered.facts.get(host) or {})
            if d["name"] in check.REBUILT
        ]
        for host in inventory.hosts
    }
    talk = not args.quiet
    if not any(differ.values()):
        if talk:
            print(
                "bwtune recipe verify: the hosts have the recipe's stack: nothing to build", file=sys.stderr
            )
        return {}
    real = [host for host in inventory.hosts if not inventory.simulated(host)]
    if real:
        return _fail(
            "verify",
            f"--apply-stack: {', '.join(real)} {'is' if len(real) == 1 else 'are'} not simulated: a scratch "
            "stack (one that does not become current) is built on simulated hosts only for now, as "
            "provision.yml makes each stack it builds current; build it with bwtune recipe apply, or "
            "verify without --apply-stack",
        )
    if not apply.build_vars(recipe):
        return _fail(
            "verify", f"--apply-stack: {args.file} pins no stack input to build", exit_codes.BAD_INPUT
        )
    if talk:
        for host, found in differ.items():
            if found:
                words = "; ".join(f"{d['words']} {d['host'] or 'none'} (recipe {d['recipe']})" for d in found)
                print(
                    f"bwtune recipe verify: {host}: stack inputs that differ: {words}; building the "
                    "recipe's stack (a scratch one, not current)",
                    file=sys.stderr,
                )
    steps = recipe_service.prepare(
        recipe_service.StepsRequest(
            inventory, recipe, build_hosts=list(inventory.hosts), scratch=True, options=options
        )
    )
    if steps.canceled:
        return exit_codes.CANCELED
    if steps.error or steps.failed:
        why = steps.error or "; ".join(steps.failed.values())
        return _fail(
            "verify",
            f"could not run (the recipe's stack could not be built: {why})",
            exit_codes.NOTHING_MEASURED,
        )
    missing = recipe_service.not_simulated_parts(recipe)
    if talk and missing:
        print(
            f"bwtune recipe verify: not simulated (no code is built for the stand-in): {', '.join(missing)}",
            file=sys.stderr,
        )
    return steps.pythons()


def _check_attestation(path: Path | None) -> None:
    """Refuse, before any launch, an --attestation that cannot be written: a folder, or one
    under a path that is not a folder."""
    if path is None:
        return
    if path.is_dir():
        raise recipe_file.RecipeError(f"--attestation {path}: is a folder; name the file to write")
    parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise recipe_file.RecipeError(f"--attestation {path}: {parent} is not a folder")


def _verify(args: argparse.Namespace) -> int:
    try:
        if not 1 <= args.launches <= MAX_LAUNCHES:
            raise recipe_file.RecipeError(f"--launches {args.launches}: between 1 and {MAX_LAUNCHES}")
        recipe, inventory, extra_vars = _inventory(args, "verify")
        matrix = verify.matrix_of(recipe, args.model_path)
        _check_attestation(args.attestation)
        store.check_writable()
    except (*BAD_INPUTS, store.StorageError) as exc:
        return _fail("verify", exc)
    scratch: dict[str, str] = {}  # host -> the scratch stack's Python (--apply-stack)
    if args.apply_stack:
        built = _scratch_stack(args, recipe, inventory, extra_vars)
        if isinstance(built, int):
            return built
        scratch = built
        extra_vars = [
            *extra_vars,
            *recipe_service.sweep_vars(scratch, [h for h in scratch if inventory.simulated(h)]),
        ]
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
    if scratch:
        on_scratch = (
            "measured under the recipe's stack, built for this verification (a scratch stack, not current)"
        )
        result.note = "; ".join(filter(None, [on_scratch, result.note]))
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
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:  # the launches are stored all the same: say so, and where
            print(f"{args.file}: {result.line}")
            return _fail(
                "verify",
                f"{path}: cannot write the attestation ({exc.strerror or exc}); the launches are "
                f"stored in run {request.run_id} (bwtune report {request.run_id})",
                exit_codes.HOST_FAILED,
            )
    if args.json:
        body = dataclasses.asdict(result)
        print(json.dumps({**body, "attestation": [str(p) for p in written]}, indent=2))
    else:
        print(f"{args.file}: {result.line}")
        if result.differ:
            differ = "; ".join(
                f"{d['words']} {d['host'] or 'none'} (recipe {d['recipe']})" for d in result.differ
            )
            print(f"measured under a different stack: stack inputs that differ from the recipe's: {differ}")
            if not args.apply_stack:
                print("  (--apply-stack builds the recipe's stack, a scratch one, and launches from it)")
        elif scratch:
            print(f"scratch stack: {', '.join(f'{h}: {p}' for h, p in scratch.items())}")
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
