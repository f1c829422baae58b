"""Where bwtune keeps its runs and results database ($BWTUNE_HOME, $BWTUNE_DB)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract


def bwtune_home() -> Path:
    """The runs directory's parent: $BWTUNE_HOME, else ~/.local/share/bwtune."""
    env = os.environ.get("BWTUNE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".local" / "share" / "bwtune"


def default_db_path() -> Path:
    """$BWTUNE_DB if set, else results.db next to the runs directory."""
    env = os.environ.get("BWTUNE_DB")
    return Path(env).expanduser() if env else bwtune_home() / "results.db"


def run_dir(run_id: str) -> Path:
    """`$BWTUNE_HOME/runs/<run id>`; ValueError for a run id that is not one path component."""
    return bwtune_home() / "runs" / contract.check_run_id(run_id)


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """The `--db PATH` option every command that reads or writes results shares."""
    parser.add_argument(
        "--db", metavar="PATH", type=Path, default=None,
        help="results database (default: $BWTUNE_DB, else $BWTUNE_HOME/results.db, "
        "else ~/.local/share/bwtune/results.db)",
    )  # fmt: skip


def storage_failure_message(
    err: BaseException, run_id: str, node_results: Mapping[str, str], db_path: Path | None = None
) -> str:
    """One line for results that could not be stored at the end of a sweep: where they are
    safe on the nodes and how to import them later."""
    where = ", ".join(f"{host}:{path}" for host, path in sorted(node_results.items())) or "the nodes"
    db = db_path if db_path is not None else default_db_path()
    return (
        f"could not store run {run_id} in the results database {db}: {err}; the results are kept on "
        f"{where}: copy each file here and run `bwtune import FILE --run-id {run_id}`"
    )
