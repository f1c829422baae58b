"""What a Debian 13 (trixie) host changes for the roles, on one trixie host in every run.

Whatever TESTHOSTS_RELEASE says (with trixie these are the session's hosts' release too).
The server role on trixie: tests/hosts/test_server.py (run on each of conftest.releases()).
Here: trixie's glibc 2.41 is what the preflight refuses (FlashInfer's JIT breaks there), in
one line naming the version and the variable that accepts the risk; accepted explicitly
it passes and the run warns naming the risk. The preflight run by a non-root SSH user:
without become it names the folder that user cannot write; with become (trixie's sudo) it
passes. Every module here runs under trixie's system Python 3.13.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.hosts.conftest import VENV_BIN

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

RELEASE = "trixie"
USER = "ops"  # a non-root login with sudo, as a fleet's hosts often have
PLAY = """
- hosts: testhosts
  gather_facts: false
  roles:
    - role: bwtune.sglang.preflight
"""
PREFLIGHT_VARS: dict[str, Any] = {
    "preflight_skip_gpu_check": True,
    "preflight_build_dir": "/var/tmp/bwtune-build",
    "preflight_build_disk_gib": 1,
    "preflight_stack_disk_gib": 1,
    "preflight_gib_per_job": 1,
    "preflight_python": "/usr/bin/python3",
    "bwtune_stack_root": "/opt/bwtune/stacks",
    "bwtune_model_path": "/var/tmp/models",
    "ansible_pipelining": True,
}
SUDO_USER = f"""
set -e
useradd --create-home --shell /bin/bash {USER}
install -d -m 700 -o {USER} -g {USER} /home/{USER}/.ssh
install -m 600 -o {USER} -g {USER} /root/.ssh/authorized_keys /home/{USER}/.ssh/authorized_keys
echo '{USER} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/{USER}
chmod 440 /etc/sudoers.d/{USER}
"""


@pytest.fixture(scope="module")
def host(make_testhosts: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    hosts = make_testhosts(1, release=RELEASE)
    (hosts.dir / "preflight.yml").write_text(PLAY)
    return hosts


def preflight(host: Any, *extra: str, inventory: Path | None = None, **variables: Any) -> Any:
    play = host.dir / "preflight.yml"
    args = ["-e", json.dumps({**PREFLIGHT_VARS, **variables}), *extra]
    if inventory is None:
        return host.playbook(play, *args)
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory)]
    return subprocess.run(
        [*cmd, str(play), *args], capture_output=True, text=True, env=host.env(), timeout=600, check=False
    )


def test_the_host_is_trixie_with_glibc_2_41_and_python_3_13(host: Any) -> None:
    name = host.names[0]
    assert "VERSION_CODENAME=trixie" in host.ssh(name, "cat", "/etc/os-release").stdout
    libc = host.ssh(name, "python3", "-c", "import platform; print(platform.libc_ver()[1])").stdout.strip()
    assert libc == "2.41"
    assert host.python_version() == "3.13"
    # systemd 257's early /dev unit once failed a trixie host's boot: masked in the rootfs,
    # the static nodes are still made by the unit after sysusers.
    early, dev = "systemd-tmpfiles-setup-dev-early.service", "systemd-tmpfiles-setup-dev.service"
    assert host.ssh(name, "systemctl", "is-enabled", early).stdout.strip() == "masked"
    assert host.ssh(name, "systemctl", "is-active", dev).stdout.strip() == "active"


def test_glibc_2_41_is_refused_in_one_line_naming_the_override(host: Any) -> None:
    done = preflight(host)
    assert done.returncode != 0
    failed = [line for line in done.stdout.splitlines() if line.startswith("fatal: ")]
    assert len(failed) == 1, done.stdout[-3000:]
    assert re.search(
        r"glibc: 2\.41 is >= 2\.41, where FlashInfer's JIT compilation breaks; "
        r"set preflight_accept_glibc_risk: true to build anyway",
        failed[0],
    ), failed[0]
    assert "permission:" not in failed[0]  # root: the only problem is glibc


def test_glibc_2_41_accepted_explicitly_passes_and_warns_naming_the_risk(host: Any) -> None:
    done = preflight(host, preflight_accept_glibc_risk=True)
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(
        r"\[WARNING\]: glibc: 2\.41 is >= 2\.41, accepted by preflight_accept_glibc_risk: FlashInfer",
        done.stdout + done.stderr,
    ), (done.stdout + done.stderr)[-3000:]


def test_a_non_root_user_needs_become_and_sudo_gives_it(host: Any) -> None:
    made = host.ssh(host.names[0], "sh", "-c", SUDO_USER)
    assert made.returncode == 0, made.stderr
    data = yaml.safe_load(host.inventory.read_text())
    data["all"]["children"]["testhosts"]["vars"]["ansible_user"] = USER
    inventory = host.dir / "ops-inventory.yml"
    inventory.write_text(yaml.safe_dump(data))

    plain = preflight(host, inventory=inventory, preflight_accept_glibc_risk=True)
    assert plain.returncode != 0
    assert re.search(
        rf"permission: /opt/bwtune/stacks \(its parent /opt\) is not writable by {USER}, "
        r"and the stack venv goes there; set provision_become: true",
        plain.stdout,
    ), plain.stdout[-3000:]
    become = preflight(host, "--become", inventory=inventory, preflight_accept_glibc_risk=True)
    assert become.returncode == 0, become.stdout[-3000:]
    # The same preflight as root (sudo), under trixie's Python 3.13: nothing left to refuse.
    assert "fatal:" not in become.stdout
