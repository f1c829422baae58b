"""Fresh virtual environments for the packaging tests, filled without the network when it can.

Runtime dependencies come from a wheelhouse, build/packaging-wheelhouse/, holding the same
versions the dev venv has (pinned from its `pip freeze`). The first run fills it (pip's
cache or the index, as `make venv` does); later runs install with `--no-index`. pip itself
is the dev venv's (`pip --python`), so a fresh venv needs no pip of its own.
"""

from __future__ import annotations

import email
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = REPO / "build" / "packaging-wheelhouse"
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


def runtime_requirements(wheel: Path) -> list[str]:
    """A wheel's own dependencies, without the extras (from its METADATA, not from the dev
    venv's install, which may predate a dependency added since)."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(z.read(name))
    return [r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]


def _dev_pins(dest: Path) -> Path:
    """A constraints file: every distribution of the dev venv at the version it has there."""
    frozen = subprocess.run(
        [*PIP, "freeze", "--exclude-editable"], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    pins = [line for line in frozen.splitlines() if re.match(r"^[A-Za-z0-9_.-]+==", line)]
    dest.write_text("\n".join(pins) + "\n")
    return dest


def fill_wheelhouse(requirements: list[str], work: Path) -> None:
    """Wheels for these requirements and their dependencies, at the dev venv's versions."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    constraints = _dev_pins(work / "dev-pins.txt")
    subprocess.run(
        [*PIP, "wheel", "-w", str(WHEELHOUSE), "-c", str(constraints), *requirements], check=True, timeout=900
    )


def make_venv(path: Path, requirements: list[str], work: Path) -> Path:
    """A new venv at `path` with `requirements` installed; returns its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    install = [*PIP, "--python", str(python), "install", "--no-index", "--find-links", str(WHEELHOUSE)]
    if subprocess.run([*install, *requirements], check=False, timeout=600).returncode != 0:
        # First run, or a dependency or pin moved: fetch what is missing, then offline again.
        wheels = [Path(r) for r in requirements if r.endswith(".whl")]
        fill_wheelhouse([r for r in requirements if not r.endswith(".whl")]
                        + [d for w in wheels for d in runtime_requirements(w)], work)  # fmt: skip
        subprocess.run([*install, *requirements], check=True, timeout=600)
    return path / "bin"


def isolated_env(bin_dir: Path, home: Path, **extra: str) -> dict[str, str]:
    """The environment a new user has: this venv first on PATH, nothing of the dev setup
    (no ANSIBLE_*, PYTHON*, VIRTUAL_ENV, BWTUNE_*; a HOME of its own, so no ~/.ansible)."""
    dev = ("ANSIBLE_", "PYTHON", "VIRTUAL_ENV", "BWTUNE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dev)}
    env.update(PATH=f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", HOME=str(home), **extra)
    home.mkdir(parents=True, exist_ok=True)
    return env
