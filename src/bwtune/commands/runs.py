"""`bwtune runs`: list the runs in the results database, newest first."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract
from bwtune import console, exit_codes, results_db

NAME = "runs"
HELP = "List past runs: hosts, results, failures and the best config of each."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    results_db.add_db_argument(parser)


def run(args: argparse.Namespace) -> int:
    path = args.db or results_db.default_db_path()
    try:
        conn = results_db.connect(path, create=False)  # a reading command never creates one
        try:
            runs = results_db.list_runs(conn)
        finally:
            conn.close()
    except results_db.MissingDatabaseError as err:
        if args.db is None and "BWTUNE_DB" not in os.environ:
            runs = []  # the default place, before any sweep: nothing yet, not an error
        else:
            print(f"bwtune runs: {err.args[0]}", file=sys.stderr)
            return exit_codes.BAD_INPUT
    except (results_db.SchemaTooNewError, *results_db.DB_INPUT_ERRORS) as err:
        print(f"bwtune runs: results database {path}: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    if args.json:
        json.dump(results_contract.versioned({"runs": runs}), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_runs(runs)
    return exit_codes.OK


COLUMNS = ("RUN", "STARTED", "HOSTS", "RESULTS", "OK", "FAILED", "BEST", "OBJECTIVE", "")


def print_runs(runs: list[dict]) -> None:
    if not runs:
        print("no runs yet (bwtune sweep or bwtune import adds them)")
        return
    rows = []
    for r in runs:
        objective = r["objective"]
        best = r["best"]
        best_text = f"{best['id']}@{best['host']}" if best else "-"
        value = f"{best['objective']:,.1f}" if best and best["objective"] is not None else "-"
        rows.append(
            (
                r["run_id"], r["created_at"], r["hosts"], r["results"], r["ok"],
                r["failed"], best_text, f"{value} {objective['metric']} ({objective['goal']})",
                "SIMULATED (bwtune stand-in)" if r["simulated"] else "",
            )
        )  # fmt: skip
    console.print_table(COLUMNS, rows)
