"""One stack, two hashes, each labelled (issue 20, item 17): provision names a stack by its build
inputs (its directory), `bwtune facts` fingerprints what is installed and the driver."""

from __future__ import annotations

import os
from pathlib import Path

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import stack_info
from ansible_collections.bwtune.sglang.plugins.module_utils._provision import stack_root
from bwtune.commands.provision import describe

INPUTS = {
    "torch_version": "2.13.0",
    "sglang_commit": "a" * 40,
    "cuda_version": "13.0",
    "python_version": "3.13",
    "arch": "x86_64",
    "flashinfer_version": "0.7.2",
    "options": {"enable_fp4": True},
}


def _stack(root: Path, inputs: dict) -> str:
    stack_root.write_manifest(str(root), inputs, verified=True)
    fp = stack_root.fingerprint(inputs)
    (root / fp / "bin").mkdir(parents=True, exist_ok=True)
    os.symlink("/usr/bin/python3", root / fp / "bin" / "python")
    return fp


def test_facts_carry_the_provision_name_of_the_stack_beside_their_own_fingerprint(tmp_path: Path) -> None:
    root = tmp_path / "stacks"
    first = _stack(root, INPUTS)
    second = _stack(root, {**INPUTS, "options": {"enable_fp4": True, "enable_sm90a": True}})
    stack_root.switch_current(str(root), first)
    # Through `current`, as bwtune_stack_python names it: the directory it points at.
    assert stack_info.build_fingerprint(str(root / "current" / "bin" / "python")) == first
    probe = {"torch": {"version": "2.13.0+cu130", "cuda": "13.0"}, "python": {"version": "3.13.5"}}
    a = stack_info.build_facts(probe, str(root / "current" / "bin" / "python"), "580.159.04", False)
    b = stack_info.build_facts(probe, str(root / second / "bin" / "python"), "580.159.04", False)
    assert (a["build_fingerprint"], b["build_fingerprint"]) == (first, second)
    # The facts fingerprint hashes what is installed: the same here, whatever the directory.
    assert a["fingerprint"] == b["fingerprint"] and a["fingerprint"] not in (first, second)
    # A Python outside a provisioned stack has no provision name.
    assert stack_info.build_fingerprint("/usr/bin/python3") is None
    (tmp_path / "0123456789ab" / "bin").mkdir(parents=True)  # looks like one, has no manifest
    assert stack_info.build_fingerprint(str(tmp_path / "0123456789ab" / "bin" / "python")) is None


def test_provision_labels_the_facts_fingerprint_it_made() -> None:
    stack = {
        "fingerprint": "a400606c593d",
        "verified": False,
        "changes": ["no stack yet"],
        "facts_fingerprint": "81b74dfb424f",
    }
    line = describe("node1", stack, check=False, failed=False)
    assert line == (
        "node1: stack a400606c593d built and current: no stack yet; facts fingerprint 81b74dfb424f "
        "(installed versions and driver, as bwtune facts shows)"
    )
    current = describe("node1", {**stack, "is_current": True, "verified": True}, check=False, failed=False)
    assert current.startswith(
        "node1: stack a400606c593d is current, nothing to build; facts fingerprint 81b74"
    )
    # Check mode builds nothing: there is no installed stack to fingerprint yet.
    assert "facts fingerprint" not in describe("node1", {**stack, "facts_fingerprint": None}, True, False)
