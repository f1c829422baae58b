"""Run ids and the private folder ansible-runner writes a run's events and output to."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from bwtune.store import run_dir


def new_run_id() -> str:
    """A sortable, readable run id: UTC time plus 8 random hex digits.

    Eight, not four: runs started in the same second (a fleet's schedulers, a script's
    loop) must not share a folder; with four, 50 ids in one second collided about 2% of
    the time.
    """
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + os.urandom(4).hex()


def private_data_dir(run_id: str) -> Path:
    """`$BWTUNE_HOME/runs/<run_id>/runner`, created private (0700) with its run dir."""
    path = run_dir(run_id) / "runner"
    for directory in (run_dir(run_id).parent.parent, run_dir(run_id).parent):
        directory.mkdir(parents=True, exist_ok=True)
    for directory in (run_dir(run_id), path):
        directory.mkdir(mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
    return path


def scratch_dir() -> Path:
    """A private data dir for a playbook that belongs to no run."""
    return private_data_dir("adhoc-" + new_run_id())
