"""`bwtune import`: load a node's results file (JSON lines) into the results database."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bwtune import exit_codes, store
from bwtune.matrix_file import MatrixFileError, load

NAME = "import"
HELP = "Import a results file (JSON lines from a node) into the results database; re-imports change nothing."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", metavar="RESULTS.jsonl", type=Path, help="the node's results file")
    parser.add_argument("--run-id", metavar="ID", help="store the lines under this run id instead of theirs")
    parser.add_argument(
        "--matrix", metavar="MATRIX", help="the sweep matrix (YAML): its objective ranks configs"
    )
    parser.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="import the file's good lines and skip each damaged one (not JSON, or not a results "
        "line), naming it in a warning, instead of refusing the whole file; exit 1 when one was skipped",
    )
    store.add_db_argument(parser)


def run(args: argparse.Namespace) -> int:
    try:
        # The node's own rule: a torn last line (a kill mid-write) is skipped with a warning.
        # Streamed: line by line in batches, never the whole file in memory.
        matrix = _read_matrix(args.matrix) if args.matrix else None
        store.open_results_file(args.results, run_id=args.run_id).close()  # before any database
        db_path = Path(args.db) if args.db else store.default_db_path()
        created = not db_path.exists()
        conn = store.connect(db_path)
        try:
            summary = store.import_results_file(
                conn, args.results, run_id=args.run_id, skip_bad_lines=args.skip_bad_lines
            )
            for run_id in summary.run_ids:
                if matrix is not None:
                    store.record_run(conn, run_id, matrix=matrix)
                elif (measured_for := store.measured_objective(conn, run_id)) is not None:
                    # Ranked by what the node measured for, never by a default objective.
                    store.record_run(conn, run_id, objective=measured_for)
            if summary.total == 0:
                # An empty file (or one torn first line) is a sweep that recorded nothing:
                # refused, not reported as an import.
                raise ValueError(f"{args.results}: no results line in it; nothing imported")
        except BaseException:
            conn.close()
            if created:  # a damaged line stores nothing: not even the empty database made for it
                for leftover in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
                    leftover.unlink(missing_ok=True)
            raise
        conn.close()
    except (store.ResultsFormatError, store.SchemaTooNewError, ValueError) as err:
        print(f"bwtune import: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except store.DB_INPUT_ERRORS as err:
        where = Path(args.db) if args.db else store.default_db_path()
        print(f"bwtune import: results database {where}: {_database_error(where, err)}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    skipped = 0
    for warning in summary.warnings:
        print(f"bwtune import: warning: {warning}", file=sys.stderr)
        skipped += ": skipped a line that is not " in warning
    for replacement in summary.replaced:
        print(f"bwtune import: re-measured {replacement.line()}", file=sys.stderr)
    runs = ", ".join(summary.run_ids)
    print(
        f"imported {summary.total} results into run {runs}: "
        f"{summary.added} added, {summary.updated} re-measured, {summary.unchanged} unchanged"
        + (f", {skipped} bad lines skipped" if skipped else "")
    )
    # A skipped line is a result not stored: the import did what was asked, not all there was.
    return exit_codes.HOST_FAILED if skipped else exit_codes.OK


def _read_matrix(path: str) -> dict:
    try:
        data = load(path).data
    except MatrixFileError as err:
        raise ValueError(str(err)) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a matrix must be a mapping")
    return data


def _database_error(path: Path, err: Exception) -> str:
    """What keeps the database at `path` from opening, in words: a folder on its way that is a
    file (a BWTUNE_HOME that is one), or the system's reason, never a bare errno."""
    blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        return f"cannot create it: {blocked} is a file, not a folder"
    if isinstance(err, OSError) and err.strerror:
        return f"cannot open it ({err.strerror})"
    return str(err)
