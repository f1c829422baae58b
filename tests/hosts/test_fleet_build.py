"""The whole provision chain on two identical hosts: preflight -> stack -> checkpoint -> server.

`bwtune provision --serve` runs playbooks/provision.yml with provision_serve: the first host
compiles sgl-kernel, the second only installs the wheel that went through the controller;
both verify the stack and make it current, then serve.yml puts a (small, whole) checkpoint
in place and runs the stand-in as SGLang under the new stack's Python, as a systemd unit.

On another Debian release (TESTHOSTS_RELEASE=trixie) two things differ, each said here:
the wheelhouse's torch 2.13.0 (a CPU build, found on this machine's disk) exists for
CPython 3.11 only, so where the hosts' python3 is another version the stack venv is made
by the controller's Python 3.11, bound in read-only (the server's unit, whose /root is
hidden, finds its libpython by LD_LIBRARY_PATH); and a glibc the preflight refuses (2.41)
is accepted explicitly, the run saying on bwtune's stderr what risk it took.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.hub.make_repo import make_repo
from tests.hosts import serving_stack
from tests.integration.provision.scenario import REPO, WHEELHOUSE, prepare

CALLS = "/var/tmp/nvcc-calls"
STACKS = "/opt/bwtune/stacks"
MODEL = "/models/qwen35"
# The CUDA toolkit, bind-mounted read-only into the hosts at the same path.
CUDA_HOME = os.environ.get("BWTUNE_TEST_CUDA_HOME", "/usr/local/cuda-13.0")
# The controller's Python (the venv's base): the stack's Python where the hosts' is not the
# one the wheelhouse was made for. Bound in twice: at its own path (its RUNPATH names its
# libpython there, for the tasks run as root) and outside /root, which the server's unit
# (ProtectHome, its own user) cannot enter.
PYTHON_HOME = Path(sys.base_prefix)
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
HOST_PYTHON_HOME = f"/opt/bwtune-test/python{PY}"
CONTROLLER_PYTHON = f"{HOST_PYTHON_HOME}/bin/python{PY}"
GLIBC_REFUSED_FROM = (2, 41)  # roles/preflight/defaults/main.yml preflight_glibc_below


def host_glibc(hosts, name: str) -> tuple[int, int]:
    out = hosts.ssh(name, "python3", "-c", "import platform; print(platform.libc_ver()[1])").stdout
    major, minor = out.strip().split(".")[:2]
    return int(major), int(minor)


# Longer than the suite's 600 s: bwtune provision takes under 5 minutes on a quiet 2-core
# machine, three times that and more beside make test's other checks (its pip installs on two
# hosts); the limits stop a hang, they measure nothing.
@pytest.mark.timeout(2400)
def test_provision_builds_once_for_two_hosts_then_serves(make_testhosts, tmp_path: Path) -> None:
    base = tmp_path / "scenario"
    info = prepare(base)
    # The hosts' own compiler-counting nvcc: the toolkit is bind-mounted read-only at the same path.
    hostbin = base / "hostbin"
    hostbin.mkdir()
    (hostbin / "nvcc").write_text(
        f'#!/bin/sh\ncase "$1" in --version) ;; *) echo "$*" >> {CALLS} ;; esac\n'
        f'exec {CUDA_HOME}/bin/nvcc "$@"\n'
    )
    (hostbin / "nvcc").chmod(0o755)
    model = make_repo(tmp_path / "model", shard_bytes=4096)
    # The model outside /tmp: the unit has a private /tmp. The repository gives the stand-in.
    binds = (CUDA_HOME, str(WHEELHOUSE), str(base), f"{model}:{MODEL}", str(REPO))
    binds += (str(PYTHON_HOME), f"{PYTHON_HOME}:{HOST_PYTHON_HOME}")
    hosts = make_testhosts(2, bind_ro=binds)
    builder, other = hosts.names
    own_python = hosts.python_version() == PY
    glibc_refused = host_glibc(hosts, builder) >= GLIBC_REFUSED_FROM

    variables = dict(info["vars"])
    variables.update(
        bwtune_stack_root=STACKS,
        preflight_build_dir="/var/tmp/bwtune-build",
        cuda_toolkit_nvcc_candidates=[str(hostbin / "nvcc")],
        sgl_kernel_build_dir="/var/tmp/bwtune-build",
        sgl_kernel_wheel_cache="/var/cache/bwtune/wheels",
        provision_wheelhouse=str(tmp_path / "controller-wheelhouse"),
        bwtune_model_path=MODEL,
        server_flags=serving_stack.GOOD_FLAGS,
        # The stand-in as SGLang, run by the new stack's Python (PyYAML comes with its packages).
        server_launch_command=[f"{STACKS}/current/bin/python", "-m", "bwtune.standin"],
        server_env={
            "PYTHONPATH": f"{REPO}/src:{REPO}/build/dev-collections",
            "BWTUNE_STANDIN_STARTUP_SCALE": "0.002",
        },
        server_health_timeout_s=60,
        server_restart_sec=1,
        ansible_pipelining=True,
    )
    if not own_python:
        # No torch 2.13.0 wheel for the hosts' Python here: the controller's Python makes the venv.
        variables.update(preflight_python=CONTROLLER_PYTHON, torch_venv_python=CONTROLLER_PYTHON)
        variables["server_env"]["LD_LIBRARY_PATH"] = f"{HOST_PYTHON_HOME}/lib"
    if glibc_refused:
        variables["preflight_accept_glibc_risk"] = True  # said explicitly; the run must name the risk
    varfile = tmp_path / "provision-vars.json"
    varfile.write_text(json.dumps(variables))
    bwtune = Path(sys.executable).parent / "bwtune"
    cmd = [str(bwtune), "provision", "--serve", "--json", "-i", str(hosts.inventory), "-e", f"@{varfile}"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=hosts.env(), timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout)
    assert out["serve"] is True
    if glibc_refused:
        # Each host's preflight says the risk it took, on bwtune's stderr.
        warned = re.findall(
            r"^(\S+): [^:]+: warning: glibc: \S+ is >= 2\.41, "
            r"accepted by preflight_accept_glibc_risk: FlashInfer",
            done.stderr,
            re.M,
        )
        assert sorted(warned) == sorted(hosts.names), done.stderr[-4000:]
    fingerprint = out["hosts"][builder]["fingerprint"]
    assert out["hosts"][other]["fingerprint"] == fingerprint

    # The builder compiled; the other host never ran nvcc but has the same verified wheel, installed.
    assert int(hosts.ssh(builder, "sh", "-c", f"wc -l < {CALLS}").stdout.strip() or 0) > 0
    assert hosts.ssh(other, "test", "-e", CALLS).returncode == 1
    fetched = list((tmp_path / "controller-wheelhouse" / fingerprint).glob("sglang_kernel-*.whl"))
    assert len(fetched) == 1
    for name in (builder, other):
        cached = hosts.ssh(name, "ls", f"/var/cache/bwtune/wheels/{fingerprint}").stdout.split()
        assert cached == [fetched[0].name]
        assert hosts.ssh(name, "readlink", f"{STACKS}/current").stdout.strip() == fingerprint
        probe = hosts.ssh(
            name, f"{STACKS}/current/bin/python", "-c", "import sgl_kernel; print(sgl_kernel.FP4)"
        )
        assert probe.returncode == 0 and probe.stdout.strip() == "True", probe.stderr

        # Then served: the unit runs the stand-in under the new stack's Python, healthy, with the key.
        active = hosts.ssh(name, "systemctl", "is-active", serving_stack.UNIT)
        assert active.stdout.strip() == "active"
        pid = hosts.ssh(
            name, "systemctl", "show", serving_stack.UNIT, "-p", "MainPID", "--value"
        ).stdout.strip()
        argv = hosts.ssh(name, "cat", f"/proc/{pid}/cmdline").stdout.split("\0")
        assert argv[:3] == [f"{STACKS}/current/bin/python", "-m", "bwtune.standin"]
        assert serving_stack.http_get(hosts, name, "/health")["status"] == 200
        info_body = serving_stack.http_get(hosts, name, "/server_info", "FILE")
        assert info_body["status"] == 200
        assert json.loads(info_body["body"])["tp_size"] == serving_stack.GOOD_FLAGS["tp-size"]
