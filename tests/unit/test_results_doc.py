"""docs/architecture.md's results-line tables are generated from results_fields.FIELDS and
must stay in sync with it (scripts/gen_results_doc.py writes them)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_fields

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gen_results_doc.py"


def generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_results_doc", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_results_line_tables_are_what_the_field_table_says() -> None:
    gen = generator()
    doc = gen.DOC.read_text(encoding="utf-8")
    assert gen.render(doc) == doc, "docs/architecture.md is out of date: run scripts/gen_results_doc.py"


def test_a_changed_field_makes_the_doc_stale(monkeypatch: Any) -> None:
    gen = generator()
    doc = gen.DOC.read_text(encoding="utf-8")
    first = results_fields.FIELDS[0]
    changed = type(first)(**{**first.__dict__, "doc": "Something else."})
    monkeypatch.setattr(results_fields, "FIELDS", (changed, *results_fields.FIELDS[1:]))
    assert gen.render(doc) != doc


def test_the_table_has_one_row_per_field_in_order() -> None:
    rows = generator().tables().split("\n\n")[0].splitlines()[2:]
    assert [row.split(" | ")[0].strip("|` ") for row in rows] == [f.name for f in results_fields.FIELDS]


def _top_level_keys(text: str) -> list[str]:
    """The keys of the outermost object of the example (it abbreviates some values, so it is
    read by its braces and strings, not as JSON)."""
    keys, depth = [], 0
    for token in re.finditer(r'"([^"]*)"\s*(:)?|[{\[]|[}\]]', text):
        if token.group(0) in "{[":
            depth += 1
        elif token.group(0) in "}]":
            depth -= 1
        elif token.group(2) and depth == 1:
            keys.append(token.group(1))
    return keys


def test_the_example_line_has_every_field_in_order() -> None:
    doc = generator().DOC.read_text(encoding="utf-8")
    section = doc[doc.index("### Results file") :]
    start = section.index("```json") + len("```json")
    example = section[start : section.index("```", start)]
    assert _top_level_keys(example) == [f.name for f in results_fields.FIELDS]
    assert f'"schema": {json.dumps(results_fields.SCHEMA_VERSION)}' in example
