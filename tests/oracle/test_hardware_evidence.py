"""The planner's hardware rules have release boundaries read from each release's source: the
lines docs/sglang-rules-evidence.md cites still say, in every release copy under
build/sglang-releases/, what the rule claims (tests/oracle/hardware_evidence.py). Where a
claim starts and ends, without the copies: tests/unit/test_hardware_evidence.py."""

from __future__ import annotations

import pytest

from tests.oracle import hardware_evidence, releases


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
