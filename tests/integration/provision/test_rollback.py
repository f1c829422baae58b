"""playbooks/rollback.yml moves `current` back to the previous verified stack, or to a named one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import stack_root as sl

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def stack(root: Path, commit: str, verified: bool = True) -> str:
    inputs = {
        "torch_version": "2.12.0.dev20260307+cu130",
        "sglang_commit": commit * 40,
        "cuda_version": "13.0",
        "python_version": "3.12",
        "arch": "x86_64",
        "flashinfer_version": "0.7.2",
        "options": {},
    }
    sl.write_manifest(str(root), inputs, verified=verified)
    return sl.fingerprint(inputs)


def rollback(root: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        str(BIN / "ansible-playbook"),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-e",
        f"bwtune_stack_root={root}",
        *extra,
        str(REPO / "playbooks" / "rollback.yml"),
    ]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", ANSIBLE_NOCOLOR="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def test_rollback_to_previous_then_to_named_and_refuses_unverified(tmp_path: Path) -> None:
    a, b = stack(tmp_path, "a"), stack(tmp_path, "b")
    broken = stack(tmp_path, "c", verified=False)
    sl.switch_current(str(tmp_path), a)
    sl.switch_current(str(tmp_path), b)

    proc = rollback(tmp_path, "--check")
    assert proc.returncode == 0 and "changed=1" in proc.stdout, proc.stdout
    assert sl.current(str(tmp_path)) == b  # check mode moved nothing

    proc = rollback(tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert f"current: {b} -> {a}" in proc.stdout
    assert sl.current(str(tmp_path)) == a

    proc = rollback(tmp_path, "-e", f"rollback_to={b}")
    assert proc.returncode == 0 and sl.current(str(tmp_path)) == b, proc.stdout

    proc = rollback(tmp_path, "-e", f"rollback_to={broken}")
    assert proc.returncode == 2
    assert f"cannot roll back to {broken}: no verified stack with that fingerprint" in proc.stdout
    assert sl.current(str(tmp_path)) == b
