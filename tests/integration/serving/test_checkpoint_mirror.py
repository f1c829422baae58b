"""The checkpoint role's mirror path, fanned out to two hosts (both this machine, local connection).

The mirror is a directory the hosts see (an NFS mount in a fleet) holding a checkpoint and
the manifest a Hub fetch left there (sizes and sha256). Each host copies it and verifies it
with the mirror's hashes; an unchanged re-run changes nothing; a mirror file whose bytes no
longer match its hash fails naming it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._checkpoint import checkpoint_download as cf
from tests.fixtures.hub.make_repo import SHARDS, make_repo

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PLAY = """
- hosts: nodes
  gather_facts: false
  roles:
    - role: bwtune.sglang.checkpoint
"""


def mirror(tmp_path: Path) -> Path:
    d = make_repo(tmp_path / "mirror", shard_bytes=1 << 20)
    files = {
        str(p.relative_to(d)): {
            "size": p.stat().st_size,
            "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
        }
        for p in d.iterdir()
        if p.suffix == ".safetensors"
    }
    files.update({p.name: {"size": p.stat().st_size, "sha256": None} for p in d.glob("*.json")})
    cf.write_manifest(
        str(d), {"schema": 1, "source": "hub:x/y", "commit": "c" * 40, "files": files, "verified": {}}
    )
    return d


def run(tmp_path: Path, source: Path) -> subprocess.CompletedProcess:
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {
        name: {**local, "checkpoint_path": str(tmp_path / name / "model")} for name in ("node-1", "node-2")
    }
    (tmp_path / "inventory.yml").write_text(
        yaml.safe_dump({"all": {"children": {"nodes": {"hosts": hosts}}}})
    )
    (tmp_path / "play.yml").write_text(PLAY)
    variables = {
        "checkpoint_source": "mirror",
        "checkpoint_mirror": str(source),
        "checkpoint_headroom_gb": 0.001,
    }
    (tmp_path / "vars.yml").write_text(yaml.safe_dump(variables))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env["PATH"]
    cmd = ["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")]
    return subprocess.run(
        [*cmd, "-e", f"@{tmp_path / 'vars.yml'}"], capture_output=True, text=True, env=env, check=False
    )


def changed(done: subprocess.CompletedProcess) -> dict[str, int]:
    return {m[0]: int(m[1]) for m in re.findall(r"^(node-\d)\s+: ok=\d+\s+changed=(\d+)", done.stdout, re.M)}


def test_mirror_fans_out_to_two_hosts_verified_then_leaves_them_alone(tmp_path: Path) -> None:
    source = mirror(tmp_path)
    partial = tmp_path / "node-2" / "model" / SHARDS[0]
    partial.parent.mkdir(parents=True)
    partial.write_bytes((source / SHARDS[0]).read_bytes()[:5000])  # an interrupted copy
    first = run(tmp_path, source)
    assert first.returncode == 0, first.stdout[-3000:]
    for name in ("node-1", "node-2"):
        target = tmp_path / name / "model"
        for shard in SHARDS:
            assert (target / shard).read_bytes() == (source / shard).read_bytes()
        assert cf.read_manifest(str(target))["source"] == f"mirror:{source}"
    again = run(tmp_path, source)
    assert again.returncode == 0 and changed(again) == {"node-1": 0, "node-2": 0}, again.stdout[-3000:]


def test_mirror_file_that_differs_from_its_hash_fails_naming_it(tmp_path: Path) -> None:
    source = mirror(tmp_path)
    data = bytearray((source / SHARDS[1]).read_bytes())
    data[-1] ^= 0xFF
    (source / SHARDS[1]).write_bytes(bytes(data))
    done = run(tmp_path, source)
    assert done.returncode != 0
    assert re.search(rf"{SHARDS[1]}: sha256 \w+\.\.\. differs from the source's", done.stdout), done.stdout[
        -3000:
    ]
