"""`bwtune runs`: list the runs in the results database, newest first."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from bwtune import console, exit_codes, store

NAME = "runs"
HELP = "List past runs: hosts, results, failures and the best config of each."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    store.add_db_argument(parser)


def run(args: argparse.Namespace) -> int:
    path = args.db or store.default_db_path()
    try:
        conn = store.connect_readonly(path)  # a reading command never creates or changes one
        store.print_notice(conn, "bwtune runs")
        try:
            runs = store.list_runs(conn)
        finally:
            conn.close()
    except store.MissingDatabaseError as err:
        if args.db is None and "BWTUNE_DB" not in os.environ:
            runs = []  # the default place, before any sweep: nothing yet, not an error
        else:
            print(f"bwtune runs: {err.args[0]}", file=sys.stderr)
            return exit_codes.BAD_INPUT
    except (store.SchemaTooNewError, *store.DB_INPUT_ERRORS) as err:
        print(f"bwtune runs: results database {path}: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    if args.json:
        json.dump(results_contract.versioned({"runs": runs}), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_runs(runs)
    return exit_codes.OK


SIMULATED = "SIMULATED (bwtune stand-in)"
# On a narrow terminal the run id, the simulated label, the best config and its value stay;
# the others go in this order (bwtune.console): STARTED, RESULTS, HOSTS, OBJECTIVE, FAILED, OK.
COLUMNS = (
    console.Column("RUN", keep=console.ALWAYS),
    console.Column("STARTED", keep=20),
    console.Column("HOSTS", keep=30),
    console.Column("RESULTS", keep=25),
    console.Column("OK", keep=60),
    console.Column("FAILED", keep=55),
    console.Column("BEST", keep=90),
    console.Column("VALUE", keep=85),
    console.Column("OBJECTIVE", whole=False, keep=40),
    # Never hidden; a narrow terminal gets the one word.
    console.Column("", whole=False, keep=console.ALWAYS, compact=((SIMULATED, "SIMULATED"),)),
)


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
                r["failed"], best_text, value, f"{objective['metric']} ({objective['goal']})",
                SIMULATED if r["simulated"] else "",
            )
        )  # fmt: skip
    console.print_table(COLUMNS, rows)
