"""`bwtune export`: one run's results as CSV (one row per measurement) or JSON."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract as contract
from bwtune import exit_codes, results_db

NAME = "export"
HELP = "Export a run: CSV with one row per measurement and repetition, or the JSON of `--json` output."
CSV_COLUMNS = (
    "run_id",
    "host",
    "config_id",
    "attempt",
    "status",
    "simulated",
    "workload",
    "metric",
    "repetition",
    "value",
    # The launch's cold start, one column per field (seconds; empty where null or not recorded).
    *(f"cold_start_{name}" for name in contract.COLD_START_SECONDS),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--format", choices=("csv", "json"), default="csv", help="csv (the default) or json")
    parser.add_argument(
        "--json", action="store_true", help="the same as --format json (every command's spelling)"
    )
    parser.add_argument("-o", "--output", metavar="PATH", type=Path, help="write here instead of stdout")
    results_db.add_db_argument(parser)


def run(args: argparse.Namespace) -> int:
    try:
        conn = results_db.connect(args.db, create=False)  # a reading command never creates one
        try:
            output = results_db.build_run_output(conn, args.run_id)
            output["superseded"] = results_db.superseded_results(conn, args.run_id)
        finally:
            conn.close()
    except (results_db.UnknownRunError, results_db.SchemaTooNewError, *results_db.DB_INPUT_ERRORS) as err:
        print(f"bwtune export: {_message(err)}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    as_json = args.json or args.format == "json"
    text = json.dumps(output, indent=2) + "\n" if as_json else to_csv(output)
    if args.output is None:
        sys.stdout.write(text)
        return exit_codes.OK
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as err:
        print(f"bwtune export: cannot write {args.output}: {err.strerror}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    return exit_codes.OK


def _message(err: Exception) -> str:
    return err.args[0] if isinstance(err, LookupError) and err.args else str(err)


def to_csv(output: dict[str, Any]) -> str:
    """Long format: each repetition of each metric of each workload; failures get one row.

    Earlier measurements of a re-measured config (`superseded`) come first, each row with
    its attempt number, so no measurement is missing from an export. Each row carries its
    launch's cold start (the same on every row of a launch).
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    earlier = [{**line, "id": line["config_id"]} for line in output.get("superseded") or []]
    for result in [*earlier, *output["results"]]:
        base = (output["run_id"], result["host"], result["id"], result.get("attempt", 1), result["status"],
                int(bool(result["simulated"])))  # fmt: skip
        cold = _cold_start_cells(result.get("cold_start"))
        rows: list[tuple[Any, ...]] = [
            (*base, workload, metric, index, value, *cold)
            for workload, block in sorted(result["metrics"].items())
            for index, repetition in enumerate(block.get("repetitions") or [])
            for metric, value in sorted(repetition.items())
        ]
        writer.writerows(rows or [(*base, "", "", "", "", *cold)])
    return buffer.getvalue()


def _cold_start_cells(block: Any) -> tuple[Any, ...]:
    """A line's cold-start seconds in COLD_START_SECONDS order; empty for null, and for every
    field of a line without one (older nodes, launches that never started)."""
    block = block if isinstance(block, dict) else {}
    return tuple("" if block.get(name) is None else block[name] for name in contract.COLD_START_SECONDS)
