"""`bwtune report`: write a run's report.html (self-contained) and report.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bwtune import exit_codes, results_db
from bwtune.report import SIMULATED_LABEL, write_report

NAME = "report"
HELP = "Write a run's report: report.html (self-contained, charts inline) and report.md."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--html", metavar="PATH", type=Path, help="write report.html here")
    parser.add_argument("--md", metavar="PATH", type=Path, help="write report.md here")
    results_db.add_db_argument(parser)


def run(args: argparse.Namespace) -> int:
    html, md = args.html, args.md
    try:
        if html is None and md is None:  # neither asked for: both, in the run's directory
            html = results_db.run_dir(args.run_id) / "report.html"  # ValueError: not a run id
            md = results_db.run_dir(args.run_id) / "report.md"
        conn = results_db.connect(args.db, create=False)  # a reading command never creates one
        try:
            data = write_report(conn, args.run_id, html_path=html, md_path=md)
        finally:
            conn.close()
    except (
        results_db.UnknownRunError,
        results_db.SchemaTooNewError,
        ValueError,
        *results_db.DB_INPUT_ERRORS,
    ) as err:
        message = err.args[0] if isinstance(err, LookupError) else str(err)
        print(f"bwtune report: {message}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    label = f"  [{SIMULATED_LABEL}]" if data.simulated else ""
    best = data.best
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
