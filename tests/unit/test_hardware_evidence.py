"""The planner's hardware rules have release boundaries read from each release's source: the
lines docs/sglang-rules-evidence.md cites still say, in every release copy under
build/sglang-releases/, what the rule claims, exactly from the release the rule names
(tests/oracle/hardware_evidence.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "oracle"))
import hardware_evidence  # noqa: E402
import releases  # noqa: E402


@pytest.fixture(scope="module")
def installed() -> None:
    for version in releases.RELEASES:  # idempotent: the copies are normally there already
        releases.ensure(version)


@pytest.mark.oracle
@pytest.mark.timeout(1800)
def test_every_release_source_says_what_the_hardware_rules_claim(installed) -> None:
    assert hardware_evidence.check() == []


@pytest.mark.oracle
def test_the_doc_cites_the_lines_the_renderer_finds(installed) -> None:
    doc = hardware_evidence.DOC.read_text()
    assert hardware_evidence.doc_section(doc) == hardware_evidence.render()


def test_a_claim_holds_from_the_release_the_rule_names() -> None:
    marlin = [c for c in hardware_evidence.CLAIMS if c.rule == "hopper-nvfp4-marlin-only"]
    assert {c.since for c in marlin if c.since} == {"0.5.13"}
    assert {c.until for c in marlin if c.until} == {"0.5.13"}
    assert marlin[0].expected("0.5.16") and not marlin[0].expected("0.5.12.post1")
