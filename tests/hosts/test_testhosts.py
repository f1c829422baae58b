"""The shared test-host script: hosts boot systemd, Ansible reaches them, teardown leaves nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.hosts.conftest import SCRIPT, boot


def _leftovers(hosts_names: list[str], state: Path) -> list[str]:
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"netns {n}" for n in hosts_names if n in netns]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [f"link v{n}" for n in hosts_names if f"v{n}" in links]
    mounts = Path("/proc/self/mounts").read_text()
    found += [f"mount {line.split()[1]}" for line in mounts.splitlines() if str(state) in line]
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(state) in cmdline:  # nspawn, and Ansible's ssh ControlPersist masters
            found.append(f"process {pid}: {cmdline[:80]}")
    return found


def test_two_hosts_boot_serve_ansible_and_leave_nothing(tmp_path: Path) -> None:
    state = tmp_path / "th"
    hosts = boot(state, 2)
    try:
        assert len(hosts.names) == 2
        for name in hosts.names:
            assert hosts.ssh(name, "systemctl", "is-system-running").stdout.strip() == "running"
            assert hosts.ssh(name, "hostname").stdout.strip() == name
        # The hosts reach each other and the controller's bridge address.
        a, b = hosts.names
        assert hosts.ssh(a, "python3", "-c", _CONNECT, hosts.addresses[b], "22").returncode == 0
        # Ansible over SSH, with the inventory the script wrote.
        proc = subprocess.run(
            [
                str(Path(sys.executable).parent / "ansible"),
                "-i",
                str(hosts.inventory),
                "all",
                "-m",
                "ansible.builtin.setup",
                "-a",
                "filter=ansible_service_mgr",
                "-o",
            ],
            capture_output=True,
            text=True,
            env=hosts.env(),
            timeout=120,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        for line in proc.stdout.splitlines():
            result = json.loads(line.split("=>", 1)[1])
            assert result["ansible_facts"]["ansible_service_mgr"] == "systemd"
        status = subprocess.run(
            [str(SCRIPT), "status"],
            env=dict(os.environ, TESTHOSTS_DIR=str(state)),
            capture_output=True,
            text=True,
        )
        assert status.returncode == 0 and status.stdout.count(" running") == 2, status.stdout
    finally:
        hosts.down()
    assert _leftovers(hosts.names, state) == []
    assert not (state / "inventory.yml").exists()
    status = subprocess.run(
        [str(SCRIPT), "status"],
        env=dict(os.environ, TESTHOSTS_DIR=str(state)),
        capture_output=True,
        text=True,
    )
    assert status.returncode == 1


def test_bad_host_count_is_one_line_and_touches_nothing(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(SCRIPT), "up", "0"],
        env=dict(os.environ, TESTHOSTS_DIR=str(tmp_path / "th")),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["testhosts: up: host count must be 1..99, got '0'"]
    assert not (tmp_path / "th").exists()


_CONNECT = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()"
