"""cuda_toolkit's cuDNN check: a node without cuDNN's header gets the role's own line, not a
filter error (found on the README's inventory/local.yml, issue 20)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BIN = Path(sys.executable).parent


def cudnn_check(tmp_path: Path, header: str | None) -> subprocess.CompletedProcess:
    include = tmp_path / "include"
    include.mkdir()
    if header is not None:
        (include / "cudnn_version.h").write_text(header)
    variables = {
        "cuda_toolkit_cudnn_include_dirs": [str(include)],
        "cuda_toolkit_pip_prefix": str(tmp_path / "prefix"),
        "cuda_toolkit_min_cudnn": "9.15",
    }
    cmd = [
        str(BIN / "ansible"),
        "localhost",
        "-c",
        "local",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-e",
        json.dumps(variables),
        "-m",
        "ansible.builtin.include_role",
        "-a",
        "name=bwtune.sglang.cuda_toolkit tasks_from=cudnn",
    ]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", ANSIBLE_NOCOLOR="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def test_no_cudnn_header_is_the_roles_line(tmp_path: Path) -> None:
    proc = cudnn_check(tmp_path, None)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "cuda_toolkit: cuDNN not found" in out and "cuda_toolkit_require_cudnn to false" in out, out
    assert "filter plugin" not in out, out


def test_a_new_enough_cudnn_passes(tmp_path: Path) -> None:
    proc = cudnn_check(tmp_path, "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 15\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
