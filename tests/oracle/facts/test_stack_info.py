"""stack_info probes the real oracle venv of SGLang 0.5.23 (a fake stack venv:
tests/unit/facts/test_stack_info.py)."""

from __future__ import annotations

import subprocess

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import stack_info
from tests.unit.facts.helpers import ROOT


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.oracle
@pytest.mark.slow
def test_real_sglang_0_5_23_oracle_venv():
    """The real SGLang 0.5.23 parser (CPU torch, stub sgl_kernel); builds the venv if missing."""
    subprocess.run(["bash", str(ROOT / "tests" / "oracle" / "make_venv.sh"), "0.5.23"], check=True)
    python = ROOT / "build" / "oracle" / "sglang-0.5.23" / "bin" / "python"
    f = stack_info.gather(run, str(python), None, driver="580.159.04")
    s = f["sglang"]
    assert s["version"] == "0.5.23" and s["git_commit"] is None
    assert s["flag_count"] > 300
    assert "flashinfer_cutlass" in s["flags"]["moe-runner-backend"]["choices"]
    assert "mamba-radix-cache-strategy" in s["flags"] and "mamba-scheduler-strategy" not in s["flags"]
    assert f["torch"]["version"].endswith("+cpu") and f["torch"]["cuda"] is None
    assert f["flashinfer"]["version"] == "0.7.2"
