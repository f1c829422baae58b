"""The planner's hardware rules have release boundaries read from each release's source: a
claim holds exactly from the release the rule names (tests/oracle/hardware_evidence.py; that the
release copies still say it: tests/oracle/test_hardware_evidence.py, oracle tier)."""

from __future__ import annotations

from tests.oracle import hardware_evidence


def test_a_claim_holds_from_the_release_the_rule_names() -> None:
    marlin = [c for c in hardware_evidence.CLAIMS if c.rule == "hopper-nvfp4-marlin-only"]
    assert {c.since for c in marlin if c.since} == {"0.5.13"}
    assert {c.until for c in marlin if c.until} == {"0.5.13"}
    assert marlin[0].expected("0.5.16") and not marlin[0].expected("0.5.12.post1")
