"""`bwtune report`: write a run's report.html (self-contained) and report.md."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import exit_codes, store

NAME = "report"
HELP = "Write a run's report: report.html (self-contained, charts inline) and report.md."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--html", metavar="PATH", type=Path, help="write report.html here")
    parser.add_argument("--md", metavar="PATH", type=Path, help="write report.md here")
    parser.add_argument(
        "--json", action="store_true", help="print the best config and the files written as JSON on stdout"
    )
    store.add_db_argument(parser)


def run(args: argparse.Namespace) -> int:
    from bwtune.report import SIMULATED_LABEL, write_report  # charts and statistics: when asked for

    html, md = args.html, args.md
    try:
        if html is None and md is None:  # neither asked for: both, in the run's directory
            html = store.run_dir(args.run_id) / "report.html"  # ValueError: not a run id
            md = store.run_dir(args.run_id) / "report.md"
        conn = store.connect_readonly(args.db)  # a reading command never creates or changes one
        store.print_notice(conn, "bwtune report")
        try:
            data = write_report(conn, args.run_id, html_path=html, md_path=md)
        finally:
            conn.close()
    except (
        store.UnknownRunError,
        store.SchemaTooNewError,
        ValueError,
        *store.DB_INPUT_ERRORS,
    ) as err:
        message = err.args[0] if isinstance(err, LookupError) else str(err)
        print(f"bwtune report: {message}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    label = f"  [{SIMULATED_LABEL}]" if data.simulated else ""
    best = data.best
    if args.json:
        shown = None
        if best is not None:
            shown = {"id": best.id, "host": best.host, "objective": best.objective,
                     "launches": len(best.launches) or 1}  # fmt: skip
        body = {"run_id": args.run_id, "objective": data.objective, "best": shown,
                "simulated": data.simulated, "html": html and str(html), "md": md and str(md),
                # What the report's capacity and Pareto sections show (bwtune export's shape).
                "capacity": data.capacity, "pareto_fronts": data.latency_fronts}  # fmt: skip
        json.dump(contract.versioned(body), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return exit_codes.OK
    if best is not None:
        value = f"{data.objective['metric']} {best.objective:,.1f}"
        mean = f" ({best.launches_caption})" if best.launches else ""
        print(f"best: {best.id} on {best.host}, {value}{mean}{label}")
    else:
        print(f"best: none (no config finished ok){label}")
    for path in (html, md):
        if path is not None:
            print(path)
    return exit_codes.OK
