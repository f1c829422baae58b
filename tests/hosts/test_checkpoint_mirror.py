"""The checkpoint role's mirror path fanning out to two systemd hosts over rsync.

The mirror is on the controller (what a Hub fetch leaves there: the shards and the manifest
with their sizes and sha256), served by an rsync daemon on the hosts' bridge address, and
each host pulls `rsync://...` with the role. The second host starts with a stale copy of a
shard that has the mirror's size and mtime but other bytes (rsync's quick check trusts it;
the role's hash check must not). Checked: that host fails naming the shard while the other
gets the checkpoint; once the bad file is gone both hold it, verified by checkpoint_facts;
an unchanged re-run copies nothing (changed=0); a shard corrupted later on one host is
named by checkpoint_facts there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._checkpoint import checkpoint_download as cf
from tests.fixtures.hub.make_repo import SHARDS, make_mirror
from tests.hosts import serving_stack as stack

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

TARGET = "/models/mirrored"
RSYNC_PORT = 8873  # on the test's own bridge address, which no other run uses
PLAY = """
- hosts: testhosts
  gather_facts: false
  roles:
    - role: bwtune.sglang.checkpoint
"""


@pytest.fixture(scope="module")
def hosts(make_testhosts: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return stack.serving_hosts(make_testhosts, tmp_path_factory.mktemp("serving"))


@pytest.fixture(scope="module")
def mirror(hosts: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The mirror directory and its rsync:// URL, served while the module's tests run."""
    work = tmp_path_factory.mktemp("mirror")
    source = make_mirror(work / "checkpoint")
    conf = work / "rsyncd.conf"
    conf.write_text(f"use chroot = no\nuid = root\ngid = root\n[mirror]\npath = {source}\nread only = yes\n")
    address = hosts.controller_address
    daemon = subprocess.Popen(
        ["rsync", "--daemon", "--no-detach", f"--config={conf}",
         f"--address={address}", f"--port={RSYNC_PORT}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((address, RSYNC_PORT), timeout=1).close()
                break
            except OSError:
                assert daemon.poll() is None and time.monotonic() < deadline, "the rsync daemon did not start"
                time.sleep(0.1)
        yield {"source": source, "url": f"rsync://{address}:{RSYNC_PORT}/mirror/", "work": work}
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def fan_out(hosts: Any, mirror: dict[str, Any]) -> subprocess.CompletedProcess:
    play = mirror["work"] / "play.yml"
    play.write_text(PLAY)
    variables = {
        "checkpoint_source": "mirror",
        "checkpoint_mirror": mirror["url"],
        "checkpoint_path": TARGET,
        "checkpoint_headroom_gb": 0.001,
        "ansible_pipelining": True,
    }
    return hosts.playbook(play, "-e", json.dumps(variables))


def facts(hosts: Any) -> dict[str, dict[str, Any]]:
    """checkpoint_facts on every host (ad hoc): host -> bwtune_checkpoint."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "testhosts", "-i", str(hosts.inventory), "-o",
         "-m", "bwtune.sglang.checkpoint_facts", "-a", f"path={TARGET}"],
        capture_output=True, text=True, env=hosts.env(), timeout=300, check=False,
    )  # fmt: skip
    out = {}
    for line in done.stdout.splitlines():
        name, _, rest = line.partition(" | ")
        out[name] = json.loads(rest.partition(" => ")[2])["ansible_facts"]["bwtune_checkpoint"]
    assert set(out) == set(hosts.names), done.stdout[-3000:] + done.stderr[-3000:]
    return out


def merged(hosts: Any, name: str, path: str) -> Path:
    """A path inside a host's file system, from the controller (its overlay mount)."""
    return hosts.dir / "hosts" / name / "merged" / path.lstrip("/")


@pytest.fixture(scope="module")
def runs(hosts: Any, mirror: dict[str, Any]) -> dict[str, Any]:
    stale = hosts.names[1]
    # A stale copy rsync's quick check would keep: the mirror's size and mtime, one byte off.
    original = mirror["source"] / SHARDS[1]
    bad = bytearray(original.read_bytes())
    bad[-1] ^= 0xFF
    copy = merged(hosts, stale, f"{TARGET}/{SHARDS[1]}")
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(bytes(bad))
    st = original.stat()
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
    first = fan_out(hosts, mirror)
    assert hosts.ssh(stale, "rm", f"{TARGET}/{SHARDS[1]}").returncode == 0  # what the operator does
    second = fan_out(hosts, mirror)
    third = fan_out(hosts, mirror)
    return {"first": first, "second": second, "third": third}


def test_a_bad_copy_on_one_host_fails_naming_the_shard(hosts: Any, runs: dict[str, Any]) -> None:
    good, stale = hosts.names
    first = runs["first"].stdout
    assert runs["first"].returncode != 0
    recap = dict(re.findall(r"^(\S+)\s+: ok=\d+\s+changed=\d+\s+unreachable=\d+\s+failed=(\d+)", first, re.M))
    assert recap == {good: "0", stale: "1"}, first[-3000:]
    assert re.search(
        rf"fatal: \[{stale}\].*{SHARDS[1]}: sha256 \w+\.\.\. differs from the source's", first
    ), first[-3000:]


def test_both_hosts_get_the_checkpoint_verified(
    hosts: Any, mirror: dict[str, Any], runs: dict[str, Any]
) -> None:
    assert runs["second"].returncode == 0, runs["second"].stdout[-3000:]
    found = facts(hosts)
    for name in hosts.names:
        assert found[name]["complete"] is True, found[name]["problems"]
        for shard in SHARDS:
            want = hashlib.sha256((mirror["source"] / shard).read_bytes()).hexdigest()
            assert hosts.ssh(name, "sha256sum", f"{TARGET}/{shard}").stdout.split()[0] == want
        written = yaml.safe_load(hosts.ssh(name, "cat", f"{TARGET}/{cf.MANIFEST}").stdout)
        assert written["source"] == f"mirror:{mirror['url']}"


def test_a_rerun_copies_nothing(hosts: Any, runs: dict[str, Any]) -> None:
    good, stale = hosts.names
    assert stack.changed_counts(runs["second"].stdout)[good] == 0
    assert stack.changed_counts(runs["second"].stdout)[stale] > 0
    assert runs["third"].returncode == 0, runs["third"].stdout[-3000:]
    assert stack.changed_counts(runs["third"].stdout) == {good: 0, stale: 0}


def test_a_shard_corrupted_later_is_named_by_checkpoint_facts(hosts: Any, runs: dict[str, Any]) -> None:
    good, stale = hosts.names
    shard = merged(hosts, good, f"{TARGET}/{SHARDS[0]}")
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    found = facts(hosts)
    assert found[stale]["complete"] is True
    assert found[good]["complete"] is False
    assert any(SHARDS[0] in problem and "sha256" in problem for problem in found[good]["problems"]), found[
        good
    ]
