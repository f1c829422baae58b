"""The torch role accepts either spelling of a pin and verifies what torch reports (issue 20).

PyPI's CUDA torch says `torch.__version__` 2.13.0+cu130 while its distribution metadata says
2.13.0; a preinstalled torch (the H200 machines' 2.11.0+cu130) is the same. A stub torch of
that kind stands in here: metadata 2.11.0, `__version__` 2.11.0+cu130, `torch.version.cuda`
13.0. Every install is offline (`--no-index`), as on a node without the index.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BIN = Path(sys.executable).parent

STUB_INIT = """\
__version__ = "2.11.0+cu130"


class version:
    cuda = "13.0"


class cuda:
    @staticmethod
    def is_available():
        return False

    @staticmethod
    def get_arch_list():
        return ["sm_90", "sm_100", "sm_120"]

    @staticmethod
    def device_count():
        return 0
"""


def stub_wheel(wheelhouse: Path) -> Path:
    """torch-2.11.0 (metadata) whose torch.__version__ is 2.11.0+cu130."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    path = wheelhouse / "torch-2.11.0-py3-none-any.whl"
    files = {
        "torch/__init__.py": STUB_INIT,
        "torch-2.11.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n",
        "torch-2.11.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append("torch-2.11.0.dist-info/RECORD,,")
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr("torch-2.11.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def run_role(tmp: Path, venv: Path, wheelhouse: Path, **role_vars: str) -> subprocess.CompletedProcess:
    playbook = tmp / "torch.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  roles: [bwtune.sglang.torch]\n")
    variables = {
        "torch_venv": str(venv),
        "torch_index_url": "",
        "torch_pip_args": ["--no-index", "--find-links", str(wheelhouse)],
        "torch_venv_python": sys.executable,
        "torch_expected_cuda": "13.0",
        **role_vars,
    }
    cmd = [
        str(BIN / "ansible-playbook"),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-e",
        json.dumps(variables),
        str(playbook),
    ]
    env = dict(
        os.environ,
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        ANSIBLE_NOCOLOR="1",
        PIP_CONFIG_FILE=os.devnull,
        PIP_FIND_LINKS="",
        PIP_EXTRA_INDEX_URL="",
        PIP_CONSTRAINT="",
    )
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def preinstalled(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A venv that already has the stub torch (as /opt/torch/.venv has its torch)."""
    base = tmp_path_factory.mktemp("torch-role")
    wheelhouse = base / "wheelhouse"
    wheel = stub_wheel(wheelhouse)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-index", str(wheel)],
        check=True,
        env=dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_CONSTRAINT=""),
    )
    empty = base / "empty-wheelhouse"
    empty.mkdir()
    return {"base": base, "venv": venv, "wheelhouse": wheelhouse, "empty": empty}


def _recap_ok(proc: subprocess.CompletedProcess) -> bool:
    return proc.returncode == 0 and "failed=0" in proc.stdout


@pytest.mark.parametrize("pin", ["2.11.0+cu130", "2.11.0"], ids=["as-torch-reports-it", "as-metadata-says"])
def test_a_preinstalled_torch_passes_in_either_spelling_without_an_index(
    preinstalled: dict, tmp_path: Path, pin: str
) -> None:
    # No wheel anywhere: pip cannot install; the venv's torch must be recognised as the pin.
    proc = run_role(tmp_path, preinstalled["venv"], preinstalled["empty"], torch_version=pin)
    assert _recap_ok(proc), proc.stdout[-3000:]
    assert "No matching distribution" not in proc.stdout


def test_an_index_without_the_local_tag_installs_and_verifies(preinstalled: dict, tmp_path: Path) -> None:
    venv = tmp_path / "fresh"
    proc = run_role(tmp_path, venv, preinstalled["wheelhouse"], torch_version="2.11.0+cu130")
    assert _recap_ok(proc), proc.stdout[-3000:]
    assert (venv / "bin/python").exists()
    probe = subprocess.run(
        [str(venv / "bin/python"), "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "2.11.0+cu130"


@pytest.mark.parametrize(
    ("role_vars", "expected"),
    [
        ({"torch_version": "2.11.0+cpu"}, "has torch 2.11.0+cu130 (distribution 2.11.0)"),
        ({"torch_version": "2.11.0", "torch_expected_cuda": "12.8"}, "built for CUDA 13.0"),
    ],
    ids=["other-local-tag", "other-cuda"],
)
def test_what_torch_reports_still_decides(
    preinstalled: dict, tmp_path: Path, role_vars: dict, expected: str
) -> None:
    proc = run_role(tmp_path, preinstalled["venv"], preinstalled["wheelhouse"], **role_vars)
    assert proc.returncode != 0, proc.stdout[-3000:]
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith(("fatal:", "failed:"))]
    assert len(failed) == 1 and "Verify torch's version and CUDA build" in proc.stdout
    assert expected in failed[0], failed[0]
