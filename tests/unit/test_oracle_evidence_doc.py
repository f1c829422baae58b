"""docs/sglang-rules-evidence.md's rule x release table is what tests/oracle/release_evidence.py
renders from the differential suite's last full run (tests/oracle/release_findings.json), so
the doc cannot drift from the data; and that data covers every release on every GPU."""

from __future__ import annotations

import json
from pathlib import Path

from tests.oracle import release_evidence, releases, sglang_oracle

REPO = Path(__file__).resolve().parents[2]

FOUND = json.loads(release_evidence.FINDINGS.read_text())


def test_the_doc_holds_what_the_renderer_makes_of_the_findings() -> None:
    in_doc = release_evidence.doc_section(release_evidence.DOC.read_text())
    assert in_doc == release_evidence.render(FOUND), (
        "the doc is stale: run .venv/bin/python tests/oracle/release_evidence.py --write"
    )


def test_the_findings_cover_every_release_on_every_gpu() -> None:
    assert set(FOUND) == {f"{v} {g}" for v in releases.RELEASES for g in sglang_oracle.GPUS}


def test_the_renderer_names_the_source_line_where_a_rule_behaves_differently() -> None:
    found = {
        "0.5.18 sm120": {
            "counts": {},
            "problems": [],
            "rules": {
                "trtllm-mha-prefill-sm100": {"accepts": 0, "refuses": {"sglang/srt/server_args.py:7": 3}}
            },
        },
        "0.5.19 sm120": {
            "counts": {},
            "problems": [],
            "rules": {"trtllm-mha-prefill-sm100": {"accepts": 3, "refuses": {}}},
        },
    }
    rule = next(r for r in release_evidence.rules.RULES if r.id == "trtllm-mha-prefill-sm100")
    row = release_evidence.segments(rule, ["0.5.18", "0.5.19"], found)
    assert row == "0.5.18: refuses (`server_args.py:7`); 0.5.19: accepts"
