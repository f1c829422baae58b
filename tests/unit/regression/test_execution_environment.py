"""execution-environment.yml is a valid ansible-builder v3 definition: `ansible-builder
create` turns it into a build context that installs the bwtune wheel (CLI + collection).
Building the image itself needs a container engine, which the test machines lack."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def test_ansible_builder_creates_the_build_context(tmp_path: Path) -> None:
    definition = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    assert definition["version"] == 3
    # The file copies dist/: give it a wheel of this checkout (no build isolation: offline).
    work = tmp_path / "repo"
    (work / "dist").mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(work / "dist"), str(REPO)], check=True)  # fmt: skip
    for name in ("execution-environment.yml", "requirements.yml"):
        (work / name).write_text((REPO / name).read_text())
    done = subprocess.run(
        [str(BIN / "ansible-builder"), "create", "-f", "execution-environment.yml", "--context", "ctx"],
        cwd=work, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    files = {p.name for p in (work / "ctx").iterdir()}
    containerfile = (
        work / "ctx" / ("Containerfile" if "Containerfile" in files else "Dockerfile")
    ).read_text()
    assert "ansible-core>=2.18,<2.20" in containerfile
    assert "pip install --no-cache-dir /tmp/bwtune-wheels/bwtune-*.whl" in containerfile
    assert [p.name for p in (work / "ctx" / "_build" / "wheels").iterdir()] == [
        "bwtune-0.1.0-py3-none-any.whl"
    ]
