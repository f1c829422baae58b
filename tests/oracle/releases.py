"""Every SGLang release bwtune knows, each installed `--no-deps` into its own directory.

One shared environment holds SGLang's dependencies: the oracle venv of the newest release
(make_venv.sh CURRENT). Each release goes into build/sglang-releases/V (`pip install
--no-deps --target`), put first on PYTHONPATH; a release that pins an older transformers
gets that transformers (with the huggingface_hub / tokenizers it accepts) from a layer
shared by every release with the same pin, build/sglang-releases/_deps/transformers-T.

    python tests/oracle/releases.py ensure 0.5.16 [...]   # install (idempotent; `all`: every release)
    python tests/oracle/releases.py pythonpath 0.5.16     # print the PYTHONPATH to use
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ORACLE_DIR = Path(__file__).resolve().parent
REPO_ROOT = ORACLE_DIR.parent.parent
RELEASES_DIR = REPO_ROOT / "build" / "sglang-releases"
DEPS_DIR = RELEASES_DIR / "_deps"

# Every 0.5.x / .postN release on PyPI from January 2026 (0.5.7, built 2026-01-01) through
# 0.5.23 (2026-10-30), oldest first; the dates are the wheels' own (METADATA timestamps).
RELEASES: dict[str, str] = {
    "0.5.7": "2026-01-01",
    "0.5.8": "2026-01-23",
    "0.5.8.post1": "2026-02-05",
    "0.5.9": "2026-02-23",
    "0.5.10": "2026-04-05",
    "0.5.10.post1": "2026-04-08",
    "0.5.11": "2026-05-07",
    "0.5.12": "2026-05-16",
    "0.5.12.post1": "2026-05-23",
    "0.5.13": "2026-06-11",
    "0.5.13.post1": "2026-06-15",
    "0.5.14": "2026-06-26",
    "0.5.15": "2026-07-10",
    "0.5.15.post1": "2026-07-14",
    "0.5.16": "2026-07-25",
    "0.5.17": "2026-08-08",
    "0.5.18": "2026-08-21",
    "0.5.19": "2026-09-04",
    "0.5.20": "2026-09-18",
    "0.5.21": "2026-10-01",
    "0.5.22": "2026-10-15",
    "0.5.23": "2026-10-30",
}
SHARED = "0.5.23"  # whose oracle venv holds the shared dependencies
SHARED_TRANSFORMERS = "5.19.0"
# What a transformers pin needs beside it (its import-time version checks).
_COMPANIONS = {
    "4": ["huggingface_hub==0.36.0", "tokenizers==0.22.1"],
    "5": ["huggingface_hub==1.5.0", "tokenizers==0.22.1"],
}
# transformers 5.x imports httpx, 0.5.18-0.5.20 import xgrammar; the shared venv lacks both.
_COMMON = ["httpx==0.28.1", "httpcore==1.0.9", "h11==0.16.0", "xgrammar==0.2.9"]
COMMON_DIR = DEPS_DIR / ("common-" + hashlib.sha256(" ".join(_COMMON).encode()).hexdigest()[:8])
_REQUIRES = re.compile(r"^Requires-Dist:\s*transformers==([\w.]+)\s*$", re.MULTILINE)


class ReleaseError(RuntimeError):
    """A release could not be installed."""


def shared_python() -> Path:
    """The shared environment's python (built by make_venv.sh on first use)."""
    if __package__:  # imported as tests.oracle.releases: the same package, one copy
        from tests.oracle import sglang_oracle
    else:  # a script, or imported by its own name (sys.path holding tests/oracle/)
        sys.path.insert(0, str(ORACLE_DIR))
        import sglang_oracle

    return sglang_oracle.oracle_python(SHARED)


def _pip(python: Path, target: Path, *requirements: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".partial")
    subprocess.run(["rm", "-rf", str(tmp)], check=True)
    argv = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-deps"]
    proc = subprocess.run(
        [*argv, "--target", str(tmp), *requirements], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise ReleaseError(f"pip install {' '.join(requirements)} failed:\n{proc.stderr[-2000:]}")
    tmp.rename(target)  # only a complete install gets the final name


def transformers_pin(version: str) -> str:
    """The transformers version the release's wheel pins."""
    metadata = next((RELEASES_DIR / version).glob("sglang-*.dist-info/METADATA"))
    match = _REQUIRES.search(metadata.read_text())
    return match.group(1) if match else SHARED_TRANSFORMERS


def _install_once(python: Path, target: Path, *requirements: str) -> None:
    """Install into `target` unless there; one installer per target (its own lock), so
    several releases install at once while two workers never install the same one."""
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():  # another worker may have installed it while we waited
            _pip(python, target, *requirements)


def ensure(version: str) -> None:
    """Install release `version` (and the layers it needs) unless already there."""
    python = shared_python()
    RELEASES_DIR.mkdir(parents=True, exist_ok=True)
    _install_once(python, COMMON_DIR, *_COMMON)
    _install_once(python, RELEASES_DIR / version, f"sglang=={version}")
    pin = transformers_pin(version)
    if pin != SHARED_TRANSFORMERS:
        companions = _COMPANIONS[pin.split(".")[0]]
        _install_once(python, DEPS_DIR / f"transformers-{pin}", f"transformers=={pin}", *companions)


def ensure_all(versions: list[str], jobs: int = 3) -> None:
    """Install several releases, `jobs` at a time (pip waits on the disk as much as the CPU)."""
    shared_python()  # built once, before the installers that need it
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for done in [pool.submit(ensure, version) for version in versions]:
            done.result()


def pythonpath(version: str) -> str:
    """PYTHONPATH that makes the shared python import release `version`."""
    parts = [RELEASES_DIR / version]
    pin = transformers_pin(version)
    if pin != SHARED_TRANSFORMERS:
        parts.append(DEPS_DIR / f"transformers-{pin}")
    parts.append(COMMON_DIR)
    return ":".join(str(p) for p in parts)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("ensure", "pythonpath"):
        print(__doc__, file=sys.stderr)
        return 2
    versions = list(RELEASES) if argv[1:] == ["all"] else argv[1:]
    ensure_all(versions)
    if argv[0] == "pythonpath":
        for version in versions:
            print(pythonpath(version))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
