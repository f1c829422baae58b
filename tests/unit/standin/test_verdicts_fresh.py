"""The stand-in's recorded verdicts are what real SGLang says today (oracle tier: builds the
oracle venvs on first use, then ~5 minutes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.oracle, pytest.mark.slow, pytest.mark.timeout(2400)]


def test_recorded_sglang_verdicts_are_fresh():
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_standin_verdicts.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=2300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
