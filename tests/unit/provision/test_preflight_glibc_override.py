"""preflight's glibc refusal names its override, and the override says what risk it takes."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import preflight as pf
from tests.unit.provision import direct

REPO = Path(__file__).resolve().parents[3]


def test_the_refusal_names_the_override_and_the_override_warns_with_the_risk() -> None:
    [line] = pf.check_glibc("2.41", "2.41")
    assert line.startswith("glibc: 2.41 is >= 2.41, where FlashInfer's JIT compilation breaks; ")
    assert "set preflight_accept_glibc_risk: true to build anyway" in line
    assert "JIT-compiled when the server first needs them" in line  # the risk, in the refusal too
    assert pf.check_glibc("2.41", "2.41", accept_risk=True) == []
    warning = pf.glibc_warning("2.41", "2.41", accept_risk=True)
    assert warning is not None and "accepted by preflight_accept_glibc_risk" in warning
    assert pf.glibc_warning("2.36", "2.41", accept_risk=True) is None  # nothing accepted there
    assert pf.glibc_warning("2.41", "2.41", accept_risk=False) is None


def test_the_module_refuses_then_warns_when_the_risk_is_accepted(tmp_path: Path) -> None:
    # Any glibc is >= 2.0: the node's own glibc is what the check refuses here.
    args = {"skip_gpu": True, "python": "/usr/bin/python3", "glibc_below": "2.0", "min_cores": 1}
    refused = direct.run("stack_preflight", args, tmp_path)
    assert refused.get("failed") and "set preflight_accept_glibc_risk: true" in refused["msg"]
    assert refused["glibc_risk"] is None
    accepted = direct.run("stack_preflight", {**args, "accept_glibc_risk": True}, tmp_path)
    assert not accepted.get("failed"), accepted.get("msg")
    assert "accepted by preflight_accept_glibc_risk" in accepted["glibc_risk"]
    assert "accepted by preflight_accept_glibc_risk" in str(accepted.get("warnings"))  # shown as a warning


def test_the_role_documents_and_passes_the_override() -> None:
    spec = yaml.safe_load((REPO / "roles/preflight/meta/argument_specs.yml").read_text())
    option = spec["argument_specs"]["main"]["options"]["preflight_accept_glibc_risk"]
    assert option["type"] == "bool" and option["default"] is False
    assert "risk" in " ".join(option["description"])
    tasks = (REPO / "roles/preflight/tasks/main.yml").read_text()
    assert 'accept_glibc_risk: "{{ preflight_accept_glibc_risk }}"' in tasks
