"""Nothing a user makes in the checkout ships (issue 20 item 7): README has them create
inventory/fleet.yml; git ignores it, and neither the galaxy tarball (galaxy.yml build_ignore,
applied by ansible-galaxy's own walk) nor the wheel (hatch_build.py) carries it."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import yaml
from ansible.galaxy.collection import _build_files_manifest_walk

from .fresh_env import REPO

SHIPPED = ["inventory/local.yml", "inventory/fleet.yml.example"]
USER_MADE = [
    "inventory/fleet.yml",
    "inventory/prod.yml",
    "inventory/lab.yml",
    "inventory/locals.yml",
    "inventory/local-2.yml",
    "inventory/fleet.yaml",
    "inventory/hosts.ini",
    "inventory/hosts",
    "inventory/group_vars/all.yml",
    "inventory/host_vars/gpu-1.yml",
]


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    for rel in [*SHIPPED, *USER_MADE]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("all: {}\n")
    shutil.copy2(REPO / "galaxy.yml", root / "galaxy.yml")
    return root


def test_git_ignores_the_users_inventories_and_tracks_the_shipped_ones() -> None:
    for rel in USER_MADE:
        done = subprocess.run(["git", "check-ignore", "-q", "--no-index", rel], cwd=REPO, timeout=30)
        assert done.returncode == 0, f"git does not ignore {rel}"
    for rel in SHIPPED:
        done = subprocess.run(["git", "check-ignore", "-q", "--no-index", rel], cwd=REPO, timeout=30)
        assert done.returncode == 1, f"git ignores {rel}"


def test_the_galaxy_tarball_ships_no_user_inventory(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    ignore = yaml.safe_load((REPO / "galaxy.yml").read_text())["build_ignore"]
    manifest = _build_files_manifest_walk(str(root).encode(), "bwtune", "sglang", ignore)
    files = {entry["name"] for entry in manifest["files"] if entry["ftype"] == "file"}
    assert set(SHIPPED) <= files
    assert files & set(USER_MADE) == set()


def test_the_wheel_ships_no_user_inventory(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    spec = importlib.util.spec_from_file_location("bwtune_hatch_build", REPO / "hatch_build.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    prefix = "ansible_collections/bwtune/sglang/"
    files = {dest.removeprefix(prefix) for dest in hook.collection_files(root).values()}
    assert set(SHIPPED) <= files
    assert files & set(USER_MADE) == set()
