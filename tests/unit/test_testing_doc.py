"""docs/testing.md gives no test count that goes stale (issue 22): it says how to ask pytest,
with the same selection as `make test-fast`."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_docs_count_command_selects_what_make_test_fast_runs() -> None:
    make = (REPO / "Makefile").read_text(encoding="utf-8")
    fast = re.search(r'^test-fast:.*\n\t\$\(call run_pytest,(?:-n \S+ )?-m "([^"]+)"\)', make, re.MULTILINE)
    assert fast is not None
    doc = (REPO / "docs" / "testing.md").read_text(encoding="utf-8")
    assert f'pytest --collect-only -q -m "{fast.group(1)}"' in doc
    assert f'`-m "{fast.group(1)}"`' in doc  # the tier table says the same selection
    # No fixed count of the fast tier's tests but the one dated by its measurement.
    assert re.findall(r"\b\d[\d,]* tests\b", doc) == ["819 tests"]
