"""The checkpoint role's Hub path: the real huggingface_hub client against a local Hub server.

tests/fixtures/hub/hub_server.py speaks the Hub's download API (tree listing, HEAD/GET
resolve with ranges); the role runs on localhost with the controller's Python as the
"stack" (it has huggingface_hub). A dropped download resumes where it stopped (a Range
request); after a failed run, the next fetches only what is missing (huggingface_hub >= 2
deletes a failed partial file, so resuming across runs is per file); a verified checkpoint
is not fetched again; a shard whose bytes differ from the listed sha256, and a shard the
index names but the source lacks, each fail naming the shard; too little disk is refused
with the numbers; the token appears in no output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.hub.hub_server import HubServer
from tests.fixtures.hub.make_repo import SHARDS, make_repo

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO_ID = "nvidia/Tiny-Qwen3.5-NVFP4"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "hf_TESTTOKEN_not_for_logs_8c1f"
CHUNK = 10 * 1024 * 1024  # huggingface_hub writes downloads in 10 MiB chunks
PLAY = """
- hosts: node
  gather_facts: false
  roles:
    - role: bwtune.sglang.checkpoint
"""


def run_role(tmp_path: Path, hub: HubServer, **extra: Any) -> subprocess.CompletedProcess:
    inventory = {
        "all": {
            "hosts": {"node": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    variables = {
        "checkpoint_source": "hub",
        "checkpoint_repo_id": REPO_ID,
        "checkpoint_revision": COMMIT,
        "checkpoint_path": str(tmp_path / "models" / "tiny"),
        "checkpoint_cache_dir": str(tmp_path / "hf-cache"),
        "checkpoint_python": sys.executable,
        "checkpoint_hf_endpoint": hub.endpoint,
        "checkpoint_hf_token": TOKEN,
        "checkpoint_headroom_gb": 0.001,
        **extra,
    }
    (tmp_path / "vars.yml").write_text(yaml.safe_dump(variables))
    env = dict(os.environ, ANSIBLE_LOG_PATH=str(tmp_path / "ansible.log"), ANSIBLE_NOCOLOR="1")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env["PATH"]
    cmd = ["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")]
    return subprocess.run(
        [*cmd, "-e", f"@{tmp_path / 'vars.yml'}", "-v"], capture_output=True, text=True, env=env, check=False
    )


def changed(done: subprocess.CompletedProcess) -> int:
    found = re.search(r"^node\s+: ok=\d+\s+changed=(\d+)", done.stdout, re.M)
    assert found, done.stdout
    return int(found.group(1))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "hub-repo", shard_bytes=CHUNK + (1 << 20))


def test_drops_resume_a_failed_run_is_finished_by_the_next_and_a_verified_checkpoint_is_left_alone(
    tmp_path: Path, repo: Path
) -> None:
    target = tmp_path / "models" / "tiny"
    with HubServer(repo, REPO_ID, COMMIT) as hub:
        # Shard 1: one chunk arrives and the connection drops, the retry drops before a chunk,
        # the next retry finishes; each retry asks for the rest only.
        hub.cut[SHARDS[0]] = [CHUNK + 4096, 1000]
        # Shard 2 keeps dropping before its first chunk: the client's 5 retries run out.
        hub.cut[SHARDS[1]] = [1000] * 6
        first = run_role(tmp_path, hub)
        assert first.returncode != 0
        assert "huggingface_hub download failed" in first.stdout
        assert hub.downloads_of(SHARDS[0]) == [None, f"bytes={CHUNK}-", f"bytes={CHUNK}-"]
        assert (target / SHARDS[0]).read_bytes() == (repo / SHARDS[0]).read_bytes()

        second = run_role(tmp_path, hub)
        assert second.returncode == 0, second.stdout[-3000:]
        assert len(hub.downloads_of(SHARDS[0])) == 3  # whole already: not fetched again
        assert (target / SHARDS[1]).read_bytes() == (repo / SHARDS[1]).read_bytes()

        seen = len(hub.log)
        third = run_role(tmp_path, hub)
        assert third.returncode == 0 and changed(third) == 0, third.stdout[-3000:]
        assert [p for m, p, _ in hub.log[seen:] if not p.startswith("/api/")] == []
    logs = first.stdout + first.stderr + second.stdout + third.stdout + (tmp_path / "ansible.log").read_text()
    assert TOKEN not in logs


def test_shard_with_other_bytes_than_its_hash_fails_naming_it(tmp_path: Path, repo: Path) -> None:
    with HubServer(repo, REPO_ID, COMMIT) as hub:
        hub.corrupt[SHARDS[1]] = os.urandom((repo / SHARDS[1]).stat().st_size)
        done = run_role(tmp_path, hub)
    assert done.returncode != 0
    assert re.search(rf"{SHARDS[1]}: sha256 \w+\.\.\. differs from the source's", done.stdout), done.stdout[
        -3000:
    ]
    assert SHARDS[0] + ":" not in done.stdout


def test_shard_missing_from_the_source_fails_naming_it(tmp_path: Path, repo: Path) -> None:
    (repo / SHARDS[1]).unlink()  # the index still names it
    with HubServer(repo, REPO_ID, COMMIT) as hub:
        done = run_role(tmp_path, hub)
    assert done.returncode != 0
    assert f"is not whole: {SHARDS[1]}: missing" in done.stdout, done.stdout[-3000:]


def test_too_little_disk_is_refused_with_the_numbers_before_fetching(tmp_path: Path, repo: Path) -> None:
    with HubServer(repo, REPO_ID, COMMIT) as hub:
        done = run_role(tmp_path, hub, checkpoint_headroom_gb=10**9)
        fetched = [p for m, p, _ in hub.log if m == "GET" and not p.startswith("/api/")]
    assert done.returncode != 0
    assert re.search(r"needs 0\.0 GB \+ 1000000000\.0 GB headroom, [\d.]+ GB free on /", done.stdout), (
        done.stdout
    )
    assert fetched == []
    assert not (tmp_path / "models" / "tiny").exists()


def test_unpinned_revision_is_refused(tmp_path: Path, repo: Path) -> None:
    with HubServer(repo, REPO_ID, COMMIT) as hub:
        done = run_role(tmp_path, hub, checkpoint_revision="main")
        assert hub.log == []
    assert done.returncode != 0
    assert 'checkpoint_revision: "main" is not a commit hash' in done.stdout
