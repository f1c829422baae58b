"""Fixtures for tests on real systemd hosts (systemd-nspawn, reached over SSH).

Every test under tests/hosts is marked `hosts` and `slow`. The hosts come from
scripts/testhosts/testhosts.sh (the same script molecule uses); see its README.

    def test_unit_serves(make_testhosts):
        hosts = make_testhosts(2)                   # booted, systemd running, SSH answers
        rc, out = hosts.playbook("site.yml")        # ansible-playbook -i hosts.inventory
        assert hosts.ssh(hosts.names[0], "systemctl", "is-active", "foo").stdout == "active\\n"

The Debian release is TESTHOSTS_RELEASE (default bookworm): `TESTHOSTS_RELEASE=trixie pytest
-m hosts` runs the whole tier on Debian 13. A test may name a release of its own
(make_testhosts(2, release="trixie")); ALSO_ON lists the releases the normal run covers in
part as well (tests/hosts/test_server.py, tests/hosts/test_trixie.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "testhosts" / "testhosts.sh"
VENV_BIN = Path(sys.executable).parent
DEFAULT_RELEASE = "bookworm"
# Releases a normal run also boots for a few tests (what differs by release: the system
# Python running our modules, systemd's hardening of the server's unit, glibc, sudo).
ALSO_ON = ("trixie",)


def session_release() -> str:
    """The Debian release of the host tier: TESTHOSTS_RELEASE, else bookworm."""
    return os.environ.get("TESTHOSTS_RELEASE") or DEFAULT_RELEASE


def releases() -> list[str]:
    """The session's release, then each of ALSO_ON that is another one."""
    first = session_release()
    return [first, *(r for r in ALSO_ON if r != first)]


def pytest_report_header(config: pytest.Config) -> str:
    also = ", ".join(releases()[1:]) or "-"
    return f"testhosts: Debian {session_release()} (TESTHOSTS_RELEASE); some tests also on {also}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.hosts)
            item.add_marker(pytest.mark.slow)


def _why_no_hosts() -> str | None:
    if os.geteuid() != 0:
        return "systemd-nspawn test hosts need root"
    if shutil.which("apt-get") is None and shutil.which("systemd-nspawn") is None:
        return "no systemd-nspawn and no apt-get to install it"
    return None


@dataclass
class TestHosts:
    """One set of booted hosts: its state directory, inventory and helpers."""

    __test__ = False  # not a test class

    dir: Path
    names: list[str] = field(default_factory=list)
    addresses: dict[str, str] = field(default_factory=dict)
    controller_address: str = ""
    release: str = DEFAULT_RELEASE

    def python_version(self) -> str:
        """The hosts' system Python, "3.11" (bookworm), "3.13" (trixie): what wheels they need."""
        done = self.ssh(self.names[0], "python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])")
        assert done.returncode == 0, done.stderr
        return str(done.stdout.strip())

    @property
    def inventory(self) -> Path:
        return self.dir / "inventory.yml"

    @property
    def key(self) -> Path:
        return self.dir / "id_ed25519"

    def env(self) -> dict[str, str]:
        """Environment for ansible-* commands against these hosts (fresh control sockets)."""
        env = dict(os.environ)
        env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = str(self.dir / "cp")
        env["ANSIBLE_HOST_KEY_CHECKING"] = "False"
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        return env

    def ssh(
        self, name: str, *argv: str, check: bool = False, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        """Run argv on a host as root over SSH (argv is quoted for the remote shell)."""
        import shlex

        cmd = [
            "ssh",
            "-i",
            str(self.key),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            f"root@{self.addresses[name]}",
            shlex.join(argv),
        ]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=timeout)

    def playbook(
        self, playbook: str | os.PathLike, *extra: str, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        """ansible-playbook -i <inventory> PLAYBOOK EXTRA... (output captured)."""
        cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory), str(playbook), *extra]
        return subprocess.run(cmd, capture_output=True, text=True, env=self.env(), timeout=timeout)

    def down(self) -> None:
        _script("down", state=self.dir)


def _script(*argv: str, state: Path, timeout: float = 600, release: str | None = None) -> None:
    env = dict(os.environ, TESTHOSTS_DIR=str(state))
    if release is not None:
        env["TESTHOSTS_RELEASE"] = release
    proc = subprocess.run([str(SCRIPT), *argv], env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(
            f"testhosts.sh {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )


def boot(state: Path, count: int, bind_ro: Sequence[str] = (), release: str | None = None) -> TestHosts:
    """Boot `count` hosts of `release` (default: the session's) under `state`; the caller calls .down()."""
    release = release or session_release()
    argv = ["up", str(count)]
    for spec in bind_ro:
        argv += ["--bind-ro", spec]
    _script(*argv, state=state, release=release)
    inv = yaml.safe_load((state / "inventory.yml").read_text())
    group = inv["all"]["children"]["testhosts"]
    hosts = TestHosts(
        dir=state, controller_address=group["vars"]["testhosts_controller_address"], release=release
    )
    for name, hv in group["hosts"].items():
        hosts.names.append(name)
        hosts.addresses[name] = hv["ansible_host"]
    return hosts


@pytest.fixture(scope="session")
def make_testhosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """Factory: make_testhosts(n, bind_ro=("/usr/local/cuda-13.0",), release=None) -> TestHosts.

    Each call boots its own set (own bridge and /24) of `release` (None: the session's,
    TESTHOSTS_RELEASE or bookworm); all are torn down at session end, or earlier by
    `hosts.down()`.
    """
    why = _why_no_hosts()
    if why:
        pytest.skip(why)
    made: list[TestHosts] = []

    def make(count: int, bind_ro: Sequence[str] = (), release: str | None = None) -> TestHosts:
        state = tmp_path_factory.mktemp("testhosts")
        try:
            hosts = boot(state, count, bind_ro, release)
        finally:
            made.append(TestHosts(dir=state))
        made[-1] = hosts
        return hosts

    yield make
    for hosts in made:
        hosts.down()
