"""The sgl_kernel role on a group's builder: a verified wheel that the controller's
wheelhouse already holds for the fingerprint is used, never rebuilt or replaced.

Fault campaign (issue 20, item 15): the first host of a group recompiled a fingerprint
whose wheel the controller held verified, and fetched its own wheel over it (two
different wheels for one fingerprint).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.unit.facts.conftest import cuda_libs  # noqa: F401

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
FP = "0123456789ab"
WHEEL = "sgl_kernel-0.3.99-py3-none-any.whl"


def make_wheel(path: Path, library: Path, built_by: str = "controller") -> None:
    """A minimal sgl_kernel wheel whose library carries the given GPU code."""
    files = {
        "sgl_kernel/__init__.py": f"BUILT_BY = {built_by!r}\n".encode(),
        "sgl_kernel/common_ops.so": library.read_bytes(),
        "sgl_kernel-0.3.99.dist-info/METADATA": b"Metadata-Version: 2.1\nName: sgl-kernel\nVersion: 0.3.99\n",
        "sgl_kernel-0.3.99.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("sgl_kernel-0.3.99.dist-info/RECORD,,")
    files["sgl_kernel-0.3.99.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)


def test_builder_uses_the_controllers_verified_wheel(tmp_path: Path, cuda_libs: dict) -> None:  # noqa: F811
    held = tmp_path / "controller-wheelhouse" / FP
    held.mkdir(parents=True)
    make_wheel(held / WHEEL, cuda_libs["sm_120a"])
    before = (held / WHEEL).read_bytes()
    stamp = (held / WHEEL).stat().st_mtime_ns
    # The host's cache holds a wheel of its own for the fingerprint (an earlier build).
    (tmp_path / "wheels" / FP).mkdir(parents=True)
    make_wheel(tmp_path / "wheels" / FP / "sgl_kernel-0.3.98-py3-none-any.whl", cuda_libs["sm_120a"], "host")
    stack = tmp_path / "stack"
    venv.create(stack, with_pip=True)
    role_vars = {
        "sgl_kernel_venv": str(stack),
        "sgl_kernel_fingerprint": FP,
        "sgl_kernel_sglang_commit": "a" * 40,
        # Building would fail at once: no repository, no compiler.
        "sgl_kernel_repo": str(tmp_path / "no-such-repository"),
        "sgl_kernel_nvcc": str(tmp_path / "no-nvcc"),
        "sgl_kernel_jobs": 1,
        "sgl_kernel_build_dir": str(tmp_path / "build"),
        "sgl_kernel_wheel_cache": str(tmp_path / "wheels"),
        "sgl_kernel_controller_wheelhouse": str(tmp_path / "controller-wheelhouse"),
        "sgl_kernel_require_targets": ["sm_120a"],
    }
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- hosts: all\n  gather_facts: false\n  roles:\n    - role: bwtune.sglang.sgl_kernel\n"
    )
    cmd = [
        str(BIN / "ansible-playbook"),
        "-i",
        "node1,",
        "-c",
        "local",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-e",
        json.dumps(role_vars),
        str(playbook),
    ]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]
    # The host's cache took the controller's wheel (only that one), and the stack runs it.
    assert os.listdir(tmp_path / "wheels" / FP) == [WHEEL]
    assert (tmp_path / "wheels" / FP / WHEEL).read_bytes() == before
    out = subprocess.run(
        [str(stack / "bin" / "python"), "-c", "import sgl_kernel; print(sgl_kernel.BUILT_BY)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "controller"
    # Nothing was built, and the controller's wheel is the one it was.
    assert not (tmp_path / "build" / FP).exists()
    assert sorted(os.listdir(held)) == [WHEEL]
    assert (held / WHEEL).read_bytes() == before and (held / WHEEL).stat().st_mtime_ns == stamp


pytestmark = [pytest.mark.integration, pytest.mark.slow]
