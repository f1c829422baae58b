"""The shared test-host script: hosts boot systemd, Ansible reaches them, teardown leaves nothing."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
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


def _script(*argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *argv], env=dict(os.environ, **env), capture_output=True, text=True)


def _mounts_inside(path: Path) -> list[str]:
    prefix = str(path.resolve()) + "/"
    points = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [p for p in points if p.startswith(prefix)]


def test_the_release_is_a_variable_with_its_own_cached_rootfs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TESTHOSTS_RELEASE", "TESTHOSTS_ROOTFS")}
    default = subprocess.run([str(SCRIPT), "info"], env=env, capture_output=True, text=True)
    assert default.returncode == 0, default.stderr
    assert default.stdout.startswith("release=bookworm rootfs=") and " suite=bookworm " in default.stdout
    assert "/build/testhosts/rootfs stamp=" in default.stdout  # bookworm keeps its cache path
    trixie = subprocess.run(
        [str(SCRIPT), "info"], env={**env, "TESTHOSTS_RELEASE": "trixie"}, capture_output=True, text=True
    )
    assert trixie.returncode == 0, trixie.stderr
    assert "/build/testhosts/rootfs-trixie stamp=" in trixie.stdout and " suite=trixie " in trixie.stdout
    bad = _script("up", "1", TESTHOSTS_RELEASE="trixie;rm", TESTHOSTS_DIR=str(tmp_path / "th"))
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "TESTHOSTS_RELEASE=" in bad.stderr
    assert not (tmp_path / "th").exists()


def test_rootfs_and_down_unmount_what_was_left_mounted_inside_the_cached_rootfs(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "proc").mkdir(parents=True)
    env = {"TESTHOSTS_ROOTFS": str(rootfs), "TESTHOSTS_DIR": str(tmp_path / "th")}
    stamp = _script("info", **env).stdout.split(" stamp=", 1)[1]
    (rootfs / ".bwtune-rootfs").write_text(stamp + "\n")  # a cached rootfs: nothing to build
    try:
        # What debootstrap can leave behind: /proc mounted inside the rootfs.
        subprocess.run(["mount", "-t", "proc", "proc", str(rootfs / "proc")], check=True)
        assert _mounts_inside(rootfs) == [str(rootfs.resolve() / "proc")]
        proc = _script("rootfs", **env)
        assert proc.returncode == 0, proc.stderr
        assert _mounts_inside(rootfs) == []
        # down of hosts that used this rootfs cleans it as well.
        subprocess.run(["mount", "-t", "proc", "proc", str(rootfs / "proc")], check=True)
        state = tmp_path / "th"
        state.mkdir()
        (state / "hosts.env").write_text(f"SLOT=none\nBRIDGE=bwthnone\nCOUNT=0\nROOTFS={rootfs}\n")
        proc = _script("down", TESTHOSTS_DIR=str(state))
        assert proc.returncode == 0, proc.stderr
        assert _mounts_inside(rootfs) == []
        assert not (state / "hosts.env").exists()
    finally:
        for point in _mounts_inside(rootfs):
            subprocess.run(["umount", "-l", point], check=False)


def _flock_waiters(lock: Path) -> int:
    """How many processes wait for a flock on `lock` (/proc/locks: "-> FLOCK ... maj:min:inode")."""
    inode = lock.stat().st_ino
    waiting = re.compile(rf"-> FLOCK\s+ADVISORY\s+WRITE\s+\d+\s+[0-9a-f]+:[0-9a-f]+:{inode}\s")
    return len(waiting.findall(Path("/proc/locks").read_text()))


def test_two_runs_at_once_on_a_rootfs_not_built_yet_wait_for_one_build(tmp_path: Path) -> None:
    """Two test runs (pytest-xdist workers) asking for a release's rootfs at once: one builds."""
    calls = tmp_path / "debootstrap-calls"
    stub = tmp_path / "bin" / "debootstrap"  # a build in no time: what configure_rootfs needs
    stub.parent.mkdir()
    stub.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nmkdir -p "$4/etc/systemd/system"\n')
    stub.chmod(0o755)
    rootfs = tmp_path / "rootfs-trixie"
    env = dict(os.environ, PATH=f"{stub.parent}:{os.environ['PATH']}", TESTHOSTS_RELEASE="trixie")
    env["TESTHOSTS_ROOTFS"] = str(rootfs)
    lock = Path(f"{rootfs}.lock")
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a build under way: both runs must wait for it
        runs = [
            subprocess.Popen(
                [str(SCRIPT), "rootfs"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        try:
            deadline = time.monotonic() + 60
            while _flock_waiters(lock) < 2:
                assert all(r.poll() is None for r in runs), [r.communicate() for r in runs]
                assert time.monotonic() < deadline, "the two runs never waited on the rootfs lock"
                time.sleep(0.05)
            assert not calls.exists()
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
    outs = [r.communicate(timeout=120) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outs
    assert len(calls.read_text().splitlines()) == 1
    assert " trixie " in calls.read_text()
    assert sum("building trixie rootfs" in err for _, err in outs) == 1, outs
    stamp = _script("info", **env).stdout.split(" stamp=", 1)[1]
    assert (rootfs / ".bwtune-rootfs").read_text() == stamp + "\n"
    assert not Path(f"{rootfs}.tmp").exists()


def test_two_sets_booted_at_once_get_their_own_slots_and_leave_nothing(tmp_path: Path) -> None:
    states = [tmp_path / "a", tmp_path / "b"]
    with ThreadPoolExecutor(2) as pool:  # two pytest-xdist workers booting hosts at once
        futures = [pool.submit(boot, state, 1) for state in states]
    booted = [f.result() for f in futures if f.exception() is None]  # a failed `up` tore itself down
    try:
        assert len(booted) == 2, [f.exception() for f in futures]
        (a,), (b,) = (h.names for h in booted)
        assert a.split("-")[0] != b.split("-")[0]  # bwth<slot>: each set its own bridge and /24
        assert booted[0].controller_address != booted[1].controller_address
        for hosts in booted:
            name = hosts.names[0]
            assert hosts.ssh(name, "systemctl", "is-system-running").stdout.strip() == "running"
            assert hosts.ssh(name, "hostname").stdout.strip() == name
    finally:
        for hosts in booted:
            hosts.down()
    for hosts, state in zip(booted, states, strict=True):
        assert _leftovers(hosts.names, state) == []


# A generator makes the unit at boot (a bound file needs no change to the cached rootfs).
_GENERATOR = """#!/bin/sh
cat > "$1/bwtune-boot-probe.service" <<UNIT
[Unit]
Description=bwtune test: {what}
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c '{command}'
UNIT
mkdir -p "$1/multi-user.target.wants"
ln -s ../bwtune-boot-probe.service "$1/multi-user.target.wants/bwtune-boot-probe.service"
"""


def _boot_with_probe_unit(tmp_path: Path, what: str, command: str) -> subprocess.CompletedProcess:
    generator = tmp_path / "bwtune-boot-probe"
    generator.write_text(_GENERATOR.format(what=what, command=command))
    generator.chmod(0o755)
    state = tmp_path / "th"
    bind = f"{generator}:/etc/systemd/system-generators/bwtune-boot-probe"
    up = _script("up", "1", "--bind-ro", bind, TESTHOSTS_DIR=str(state))
    if up.returncode == 0:
        _script("down", TESTHOSTS_DIR=str(state))
    return up


def test_a_unit_that_fails_once_at_boot_is_restarted_once_and_the_host_boots(tmp_path: Path) -> None:
    # As CI once saw: systemd-update-utmp-runlevel exited 219/CGROUP while other hosts booted.
    once = "test -e /run/bwtune-probe-ran || { touch /run/bwtune-probe-ran; exit 1; }"
    up = _boot_with_probe_unit(tmp_path, "fails at its first start", once)
    assert up.returncode == 0, up.stderr[-3000:]
    assert "restarting the units that failed at boot once: bwtune-boot-probe.service" in up.stderr


def test_a_unit_that_fails_twice_fails_the_host_naming_it(tmp_path: Path) -> None:
    up = _boot_with_probe_unit(tmp_path, "always fails", "exit 1")
    assert up.returncode == 1
    assert "restarting the units that failed at boot once: bwtune-boot-probe.service" in up.stderr
    assert "bwtune-boot-probe.service" in up.stderr.split("restarting the units", 1)[1]
    assert "systemd is degraded (failed units above)" in up.stderr
    assert "up failed; tearing down" in up.stderr
