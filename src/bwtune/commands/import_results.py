"""`bwtune import`: load a node's results file (JSON lines) into the results database."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bwtune import exit_codes, results_db
from bwtune.matrix_file import MatrixFileError, load

NAME = "import"
HELP = "Import a results file (JSON lines from a node) into the results database; re-imports change nothing."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", metavar="RESULTS.jsonl", type=Path, help="the node's results file")
    parser.add_argument("--run-id", metavar="ID", help="store the lines under this run id instead of theirs")
    parser.add_argument(
        "--matrix", metavar="MATRIX", help="the sweep matrix (YAML): its objective ranks configs"
    )
    results_db.add_db_argument(parser)


def run(args: argparse.Namespace) -> int:
    try:
        # The node's own rule: a torn last line (a kill mid-write) is skipped with a warning.
        content = results_db.read_results_file(args.results, run_id=args.run_id)
        matrix = _read_matrix(args.matrix) if args.matrix else None
        conn = results_db.connect(args.db)
        try:
            summary = results_db.import_results(conn, content.records, run_id=args.run_id)
            if matrix is not None:
                for run_id in summary.run_ids:
                    results_db.record_run(conn, run_id, matrix=matrix)
        finally:
            conn.close()
    except (results_db.ResultsFormatError, results_db.SchemaTooNewError, ValueError) as err:
        print(f"bwtune import: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except results_db.DB_INPUT_ERRORS as err:
        print(
            f"bwtune import: results database {args.db or results_db.default_db_path()}: {err}",
            file=sys.stderr,
        )
        return exit_codes.BAD_INPUT
    for warning in content.warnings:
        print(f"bwtune import: warning: {warning}", file=sys.stderr)
    for replacement in summary.replaced:
        print(f"bwtune import: re-measured {replacement.line()}", file=sys.stderr)
    runs = ", ".join(summary.run_ids) or "(none: the file is empty)"
    print(
        f"imported {summary.total} results into run {runs}: "
        f"{summary.added} added, {summary.updated} re-measured, {summary.unchanged} unchanged"
    )
    return exit_codes.OK


def _read_matrix(path: str) -> dict:
    try:
        data = load(path).data
    except MatrixFileError as err:
        raise ValueError(str(err)) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a matrix must be a mapping")
    return data
