"""docs/matrix.md's rules table is generated from rules.RULES and must stay in sync with it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import rules

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gen_rules_table.py"


def generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_rules_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_rules_table_is_what_the_rules_say() -> None:
    gen = generator()
    doc = gen.DOC.read_text(encoding="utf-8")
    assert gen.render(doc) == doc, "docs/matrix.md is out of date: run scripts/gen_rules_table.py"


def test_the_table_has_one_row_per_rule_in_order() -> None:
    rows = generator().table().splitlines()[2:]
    assert [row.split(" | ")[0].strip("|` ") for row in rows] == [r.id for r in rules.RULES]
