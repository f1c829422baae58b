"""Fleet build: of two identical hosts, the first compiles sgl-kernel, the second only installs the wheel."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.integration.provision.scenario import WHEELHOUSE, prepare

HERE = Path(__file__).parent
VENV = "/opt/bwtune/stacks/0123456789ab"
CALLS = "/var/tmp/nvcc-calls"
# The CUDA toolkit, bind-mounted read-only into the hosts at the same path.
CUDA_HOME = os.environ.get("BWTUNE_TEST_CUDA_HOME", "/usr/local/cuda-13.0")


def test_one_build_for_two_hosts(make_testhosts, tmp_path: Path) -> None:
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
    hosts = make_testhosts(2, bind_ro=(CUDA_HOME, str(WHEELHOUSE), str(base)))
    builder, other = hosts.names

    variables = dict(info["vars"])
    variables.update(
        fleet_venv=VENV,
        fleet_fingerprint="0123456789ab",
        fleet_controller_wheelhouse=str(tmp_path / "controller-wheelhouse"),
        sgl_kernel_nvcc=str(hostbin / "nvcc"),
        sgl_kernel_build_dir="/var/tmp/bwtune-build",
        sgl_kernel_wheel_cache="/var/cache/bwtune/wheels",
        sgl_kernel_jobs=1,
    )
    varfile = tmp_path / "fleet-vars.json"
    varfile.write_text(json.dumps(variables))
    proc = hosts.playbook(HERE / "fleet_sgl_kernel.yml", "-e", f"@{varfile}")
    assert proc.returncode == 0, proc.stdout[-4000:]

    # The builder compiled; the other host never ran nvcc but has the same verified wheel, installed.
    assert int(hosts.ssh(builder, "sh", "-c", f"wc -l < {CALLS}").stdout.strip() or 0) > 0
    assert hosts.ssh(other, "test", "-e", CALLS).returncode == 1
    fetched = list((tmp_path / "controller-wheelhouse" / "0123456789ab").glob("sglang_kernel-*.whl"))
    assert len(fetched) == 1
    for name in (builder, other):
        cached = hosts.ssh(name, "ls", "/var/cache/bwtune/wheels/0123456789ab").stdout.split()
        assert cached == [fetched[0].name]
        probe = hosts.ssh(name, f"{VENV}/bin/python", "-c", "import sgl_kernel; print(sgl_kernel.FP4)")
        assert probe.returncode == 0 and probe.stdout.strip() == "True", probe.stderr
