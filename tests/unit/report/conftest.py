from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "db"))
sys.path.insert(0, str(HERE))

from render_sample import render  # noqa: E402


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory):
    """The sample run's report.html, report.md and data (simulated, two hosts)."""
    return render(tmp_path_factory.mktemp("report"))
