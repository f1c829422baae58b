"""Fixtures for the CLI's integration tests: each test gets its own BWTUNE_HOME; tiny sweeps."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

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


MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
STANDIN = INVENTORIES / "standin.yml"
PROFILE = REPO / "src" / "bwtune" / "standin" / "profiles" / "rtx-pro-6000x8-qwen35-397b-nvfp4.yml"


@pytest.fixture
def sweep_env(cli_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The stand-in with the RTX PRO 6000 profile, its startup cut to seconds."""
    profile = yaml.safe_load(PROFILE.read_text())
    profile["startup"].update({"weight_load_s": 1, "graph_capture_s": 1})
    path = tmp_path / "fast-profile.yml"
    path.write_text(yaml.safe_dump(profile))
    return {**cli_env, "BWTUNE_STANDIN_PROFILE": str(path)}


def tiny_matrix(tmp_path: Path, backends: list[str], num_prompts: int | None = None) -> Path:
    """The demo matrix cut down to one axis and one short workload.

    The model is a copy under tmp_path, so this test's servers are told apart by their argv.
    """
    model = tmp_path / "model"
    shutil.copytree(MODEL, model)
    matrix: dict[str, Any] = yaml.safe_load((REPO / "examples" / "demo.yml").read_text())
    matrix["model"]["path"] = str(model)
    matrix["axes"] = {"moe-runner-backend": backends}
    matrix.pop("bundles", None)
    matrix.pop("exclude", None)
    matrix["workloads"] = [matrix["workloads"][0]]
    if num_prompts:
        matrix["workloads"][0]["num_prompts"] = num_prompts
    path = tmp_path / "tiny.yml"
    path.write_text(yaml.safe_dump(matrix, sort_keys=False))
    return path


def sweep_argv(inventory: Path, matrix: Path | None, node_dir: Path, *extra: str) -> list[str]:
    argv = ["sweep", "-i", str(inventory), "--node-results-dir", str(node_dir), *extra]
    if matrix is not None:
        argv += ["-m", str(matrix)]
    return bwtune_argv(*argv)


def run(argv: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=False)
