"""Fixtures for the CLI's integration tests: each test gets its own BWTUNE_HOME."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
PLAYBOOKS = HERE / "playbooks"
INVENTORIES = HERE / "inventories"
REPO = HERE.parents[2]
LOCAL_INVENTORY = REPO / "inventory" / "local.yml"


@pytest.fixture
def bwtune_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "bwtune-home"
    monkeypatch.setenv("BWTUNE_HOME", str(home))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    return home


@pytest.fixture
def cli_env(bwtune_home: Path) -> dict[str, str]:
    """The environment for a `bwtune` subprocess: this venv's tools first on PATH."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def bwtune_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "bwtune.cli", *args]
