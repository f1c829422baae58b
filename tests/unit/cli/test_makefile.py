"""`make demo` installs bwtune's runtime dependencies only; `make test` (every tier) the dev
tools too (issue 20 item 27)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _dry_run(tmp_path: Path, target: str) -> str:
    """What `make -n TARGET` would run on a fresh checkout (no venv yet)."""
    for name in ("Makefile", "pyproject.toml", "hatch_build.py"):
        shutil.copy2(REPO / name, tmp_path / name)
    done = subprocess.run(
        ["make", "-n", target], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def test_make_demo_installs_the_runtime_dependencies_only(tmp_path: Path) -> None:
    demo = _dry_run(tmp_path, "demo")
    installs = [line for line in demo.splitlines() if "pip install" in line and "--upgrade pip" not in line]
    assert installs == [".venv/bin/pip install -q -e ."], demo
    assert "bwtune demo" in demo


def test_make_test_tiers_still_install_the_dev_tools(tmp_path: Path) -> None:
    for target in ("pytest", "test-fast", "lint"):
        assert "pip install -q -e '.[dev]'" in _dry_run(tmp_path, target)
