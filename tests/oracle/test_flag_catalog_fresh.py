"""The committed flag catalog is what the SGLang releases' own parsers say today."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import catalog
from tests.oracle import releases, sglang_oracle

REPO = Path(__file__).resolve().parents[2]

# Installing the releases on a clean machine takes several minutes (first test only).
pytestmark = [pytest.mark.oracle, pytest.mark.timeout(2400)]

CATALOG = REPO / "plugins" / "module_utils" / "_sglang" / "sglang_flags.py"


def test_regenerated_catalog_equals_committed(tmp_path: Path) -> None:
    # Installs every release --no-deps on a clean machine (tests/oracle/releases.py).
    out = tmp_path / "sglang_flags.py"
    ruff = Path(sys.executable).parent / "ruff"
    env = {**os.environ, "RUFF": str(ruff), "TMPDIR": str(tmp_path)}
    subprocess.run(
        # No timeout of its own: the installs may wait on another worker's (a lock) on a
        # loaded machine; the test's 2,400 s limit stops a hang.
        ["bash", str(REPO / "scripts" / "regen-flag-catalog.sh"), str(out)],
        check=True,
        env=env,
    )
    assert out.read_text() == CATALOG.read_text(), (
        "plugins/module_utils/_sglang/sglang_flags.py is stale: run scripts/regen-flag-catalog.sh"
    )


def test_catalog_covers_every_release_and_a_known_difference() -> None:
    tables = catalog.raw_tables()
    assert set(tables) == set(releases.RELEASES)
    current = tables[sglang_oracle.CURRENT]["flags"]
    march = tables[sglang_oracle.MARCH_2026]["flags"]
    # The mamba strategy flag was renamed between the releases; the old name is gone.
    assert "mamba-scheduler-strategy" in march and "mamba-scheduler-strategy" not in current
    assert "mamba-radix-cache-strategy" in current
    tp = current["tp-size"]
    assert tp["dest"] == "tp_size" and tp["type"] == "int" and tp["aliases"] == ["tensor-parallel-size"]
    # 0.5.9 parses --tensor-parallel-size/--tp-size into dest tensor_parallel_size; the name
    # still follows the ServerArgs field (tp_size).
    assert march["tp-size"]["dest"] == "tensor_parallel_size"
    moe = current["moe-runner-backend"]
    assert moe["default"] == "auto" and "flashinfer_cutlass" in moe["choices"]
