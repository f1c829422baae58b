"""`bwtune baseline set|show|list`: name a run as a baseline, with who, when and why.

`bwtune regress --baseline NAME` compares with the named run, and its change points look at
the history from that run on: setting a baseline after a change was understood accepts it.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract
from bwtune import console, exit_codes, results_db

NAME = "baseline"
HELP = "Name a run as a regression baseline (who, when, why), show one, list them."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="{set,show,list}")
    set_ = actions.add_parser("set", help="name a run as a baseline (a name set again moves)")
    set_.add_argument("name", help="the baseline's name, e.g. production")
    set_.add_argument("run_id", help="the run (bwtune runs lists them)")
    set_.add_argument("--reason", required=True, help="why this run is the reference (kept with it)")
    set_.add_argument("--by", help="who sets it (default: the user running bwtune)")
    show = actions.add_parser("show", help="one baseline: its run, who set it, when and why")
    show.add_argument("name")
    actions.add_parser("list", help="every baseline, newest first")
    for sub in (set_, show, actions.choices["list"]):
        sub.add_argument("--json", action="store_true", help="print as JSON")
        results_db.add_db_argument(sub)


def run(args: argparse.Namespace) -> int:
    path = args.db or results_db.default_db_path()
    try:
        conn = results_db.connect(path, create=False)
    except (results_db.SchemaTooNewError, *results_db.DB_INPUT_ERRORS) as err:
        print(f"bwtune baseline: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    try:
        if args.action == "set":
            if not args.name.strip() or not args.reason.strip():
                print("bwtune baseline set: the name and --reason must not be empty", file=sys.stderr)
                return exit_codes.BAD_INPUT
            results_db.set_baseline(conn, args.name, args.run_id, set_by=args.by or getpass.getuser(),
                                    reason=args.reason)  # fmt: skip
            found = [results_db.get_baseline(conn, args.name)]
        elif args.action == "show":
            found = [results_db.get_baseline(conn, args.name)]
            if found[0] is None:
                print(
                    f"bwtune baseline show: no baseline {args.name!r} (bwtune baseline list)", file=sys.stderr
                )
                return exit_codes.BAD_INPUT
        else:
            found = list(results_db.list_baselines(conn))
    except results_db.UnknownRunError as err:
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
        console.print_table(("NAME", "RUN", "SET BY", "SET AT", "REASON"), rows)
    return exit_codes.OK
