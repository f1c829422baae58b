"""Real SGLang still gives the stand-in's recorded verdicts (sglang_verdicts.json): re-asks
every refusal and a sample of acceptances (that they cover every flag set launched, without
real SGLang: tests/unit/standin/test_verdicts_fresh.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "gen_standin_verdicts.py"


@pytest.mark.oracle
@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_real_sglang_still_gives_the_recorded_verdicts():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--sample", "10"],
        capture_output=True,
        text=True,
        timeout=2300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
