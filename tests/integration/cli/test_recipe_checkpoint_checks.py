"""playbooks/recipe_apply.yml's checkpoint checks after the checkpoint role: the recipe's
revision and shard hashes against the manifest the role verified (.bwtune-checkpoint.json).
The role itself (fetch and verify) is tested with it (tests/hosts); here its tasks are left out
and the checks run on a manifest this test writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bwtune import ansible_run

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.integration


def checks_only(tmp_path: Path, checkpoint: Path) -> Path:
    plays = yaml.safe_load((REPO / "playbooks" / "recipe_apply.yml").read_text())
    (play,) = [p for p in plays if p.get("name") == "Fetch and verify the recipe's checkpoint"]
    tasks = [
        t for t in play["tasks"] if not {"ansible.builtin.include_role", "ansible.builtin.meta"} & set(t)
    ]
    out = tmp_path / "checks.yml"
    out.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks,
                                    "vars": {"recipe_checkpoint_path": str(checkpoint)}}]))  # fmt: skip
    return out


def run_checks(tmp_path: Path, manifest: dict[str, Any] | None, **extra: Any) -> tuple[int, str]:
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir(exist_ok=True)
    if manifest is not None:
        (checkpoint / ".bwtune-checkpoint.json").write_text(json.dumps(manifest))
    cmd = [ansible_run.bwtune_bin("ansible-playbook"), "-i", "localhost,", "-c", "local",
           "-e", f"ansible_python_interpreter={sys.executable}", "-e", json.dumps(extra),
           str(checks_only(tmp_path, checkpoint))]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, done.stdout + done.stderr


MANIFEST = {
    "commit": "c" * 40,
    "files": {"a.safetensors": {"sha256": "1" * 64}, "b.safetensors": {"sha256": "2" * 64}},
}


def test_the_recipes_revision_and_hashes_pass_and_another_shard_hash_is_named(tmp_path: Path) -> None:
    code, out = run_checks(
        tmp_path, MANIFEST, recipe_revision="c" * 40, recipe_shards={"a.safetensors": "1" * 64}
    )
    assert code == 0, out
    code, out = run_checks(
        tmp_path,
        MANIFEST,
        recipe_shards={"a.safetensors": "1" * 64, "b.safetensors": "9" * 64, "c.safetensors": "3" * 64},
    )
    assert code != 0 and "b.safetensors, c.safetensors differ from the recipe's sha256" in out, out


def test_another_revision_or_no_manifest_fails_with_the_reason(tmp_path: Path) -> None:
    code, out = run_checks(tmp_path, MANIFEST, recipe_revision="e" * 40)
    assert code != 0 and f"is of revision {'c' * 40}, the recipe's {'e' * 40}" in out, out
    bare = tmp_path / "bare"
    bare.mkdir()
    code, out = run_checks(bare, None, recipe_revision="e" * 40)
    assert code != 0 and "has no .bwtune-checkpoint.json (bwtune did not fetch it)" in out, out
