"""A directory provisioning cannot write: one preflight line naming it and the way out (issue 20 #16)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import preflight as pf

REPO = Path(__file__).resolve().parents[3]


def test_an_unwritable_stack_root_names_the_path_and_says_to_become_or_own_it(tmp_path: Path) -> None:
    def root_owned(path: str, mode: int) -> bool:  # as /srv/gpu is for a `deploy` user
        return not path.startswith(str(tmp_path))

    missing = tmp_path / "none" / "stacks"
    [line] = pf.check_writable(str(missing), "the stack venv", "deploy", access=root_owned)
    assert line == (
        f"permission: {missing} (its parent {tmp_path}) is not writable by deploy, and the stack venv goes "
        "there; set provision_become: true (or ansible_become) to provision as root, "
        f"or make deploy own {tmp_path}"
    )
    # Writable (or creatable under a writable parent): nothing to say.
    assert pf.check_writable(str(missing), "the stack venv", "deploy", access=os.access) == []
    assert pf.check_writable(str(tmp_path), "x", "deploy", access=lambda p, m: True) == []


def test_a_path_under_home_is_checked_and_named_expanded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    [line] = pf.check_writable("~/cache/wheels", "the wheel cache", "deploy", access=lambda p, m: False)
    assert line.startswith(f"permission: {tmp_path}/cache/wheels (its parent {tmp_path}) is not writable")
    assert pf.check_writable("~/cache/wheels", "the wheel cache", "deploy", access=os.access) == []


def test_the_playbook_checks_every_directory_the_build_writes_and_can_become() -> None:
    tasks = yaml.safe_load((REPO / "roles/preflight/tasks/main.yml").read_text())
    check = next(t for t in tasks if "bwtune.sglang.stack_preflight" in t)
    writable = check["bwtune.sglang.stack_preflight"]["writable"]
    for name in ("bwtune_stack_root", "preflight_build_dir", "preflight_writable_paths"):
        assert name in writable
    [play, _serve] = yaml.safe_load((REPO / "playbooks/provision.yml").read_text())
    assert play["become"] == "{{ provision_become | default(false) | bool }}"
    preflight = next(t for t in play["tasks"] if t.get("name") == "Preflight")
    assert preflight["vars"]["preflight_writable_paths"] == ["{{ sgl_kernel_wheel_cache }}"]
    example = yaml.safe_load((REPO / "inventory/fleet.yml.example").read_text())
    assert example["all"]["vars"]["provision_become"] is True
    assert "sgl_kernel_sglang_commit" in example["all"]["vars"]
