"""`bwtune baseline set|show|list`: name a run as a baseline, with who, when and why.

`bwtune regress --baseline NAME` compares with the named run, and its change points look at
the history from that run on: setting a baseline after a change was understood accepts it.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sqlite3
import sys

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from bwtune import console, exit_codes, store

NAME = "baseline"
HELP = "Name a run as a regression baseline (who, when, why), show one, list them."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="{set,show,list}")
    set_ = actions.add_parser("set", help="name a run as a baseline (a name set again moves)")
    set_.add_argument("name", help="the baseline's name, e.g. production")
    set_.add_argument("run_id", help="the run (bwtune runs lists them)")
    set_.add_argument("--reason", required=True, help="why this run is the reference (kept with it)")
    set_.add_argument("--by", help="who sets it (default: the user running bwtune)")
    set_.add_argument(
        "--force",
        action="store_true",
        help="name a run that measured nothing (every launch failed) anyway: every later config "
        "that measures is then an 'improvement' against it, and no regression can be found",
    )
    show = actions.add_parser("show", help="one baseline: its run, who set it, when and why")
    show.add_argument("name")
    actions.add_parser("list", help="every baseline, newest first")
    for sub in (set_, show, actions.choices["list"]):
        sub.add_argument("--json", action="store_true", help="print as JSON")
        store.add_db_argument(sub)


def run(args: argparse.Namespace) -> int:
    path = args.db or store.default_db_path()
    try:
        if args.action == "set":
            conn = store.connect(path, create=False)
        else:  # show and list only read: never a write, never a migration
            conn = store.connect_readonly(path)
            store.print_notice(conn, f"bwtune baseline {args.action}")
    except (store.SchemaTooNewError, *store.DB_INPUT_ERRORS) as err:
        print(f"bwtune baseline: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    try:
        if args.action == "set":
            if not args.name.strip() or not args.reason.strip():
                print("bwtune baseline set: the name and --reason must not be empty", file=sys.stderr)
                return exit_codes.BAD_INPUT
            refused = _measured_nothing(conn, args.run_id)
            if refused and not args.force:
                print(
                    f"bwtune baseline set: run {args.run_id} measured nothing ({refused}): against it "
                    "every config is an 'improvement' and no regression can be found; name a run "
                    "that measured, or give --force to name it anyway",
                    file=sys.stderr,
                )
                return exit_codes.BAD_INPUT
            if refused:
                print(f"bwtune baseline set: --force: run {args.run_id} measured nothing ({refused}); "
                      "later runs find no regression against it", file=sys.stderr)  # fmt: skip
            store.set_baseline(conn, args.name, args.run_id, set_by=args.by or getpass.getuser(),
                                    reason=args.reason)  # fmt: skip
            found = [store.get_baseline(conn, args.name)]
        elif args.action == "show":
            found = [store.get_baseline(conn, args.name)]
            if found[0] is None:
                print(
                    f"bwtune baseline show: no baseline {args.name!r} (bwtune baseline list)", file=sys.stderr
                )
                return exit_codes.BAD_INPUT
        else:
            found = list(store.list_baselines(conn))
    except store.UnknownRunError as err:
        print(f"bwtune baseline {args.action}: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    finally:
        conn.close()
    if args.json:
        print(json.dumps(results_contract.versioned({"baselines": found}), indent=2))
    elif not found:
        print("no baselines yet (bwtune baseline set NAME RUN --reason WHY)")
    else:
        rows = [(b["name"], b["run_id"], b["set_by"], b["set_at"], b["reason"]) for b in found if b]
        columns = (
            console.Column("NAME", keep=console.ALWAYS),
            console.Column("RUN", keep=90),
            console.Column("SET BY", keep=40),
            console.Column("SET AT", keep=30),
            console.Column("REASON", whole=False, keep=60),  # prose: wraps between words
        )
        console.print_table(columns, rows)
    return exit_codes.OK


def _measured_nothing(conn: sqlite3.Connection, run_id: str) -> str:
    """Why the run measured nothing ("crashed 8, oom 2": its launches' failures), "" when at
    least one launch measured ok. Earlier launches of re-measured configs count too."""
    lines = [*store.run_results(conn, run_id), *store.superseded_results(conn, run_id)]
    if any(line.get("status") == results_contract.OK for line in lines):
        return ""
    counts: dict[str, int] = {}
    for line in lines:
        counts[str(line.get("status"))] = counts.get(str(line.get("status")), 0) + 1
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "no results"
