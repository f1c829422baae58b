"""Build what the test files share, once, before the suite: `make pytest-shared` runs this first.

On a fresh machine (CI) the oracle venvs, the 22 SGLang release copies, the bench_serving
venv and the test hosts' root filesystems take many minutes to build. Built by the first
test that needs them, that time counted against that test's timeout and every other worker
that needed them waited on the lock: the first parallel CI runs lost the router, test-host
and bench_serving tests that way (pytest-timeout at 600 s while another worker built). Here
they build side by side (mostly disk and pip, not CPU), with no test timeout running, and
the tests find them built. Each build is the same idempotent step a test would take, so a
second run costs seconds.

    .venv/bin/python tests/build_prereqs.py      # logs under build/prereqs/, one line per build
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "build" / "prereqs"
PYTHON = sys.executable


def _run(log: Path, *argv: str, env: dict[str, str] | None = None) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=True, cwd=REPO, env=env)


def oracle(log: Path) -> None:
    """The shared oracle venv, every release copy (three at a time), the 0.5.9 venv."""
    _run(log, "bash", "tests/oracle/make_venv.sh", "0.5.23")
    _run(log, PYTHON, "tests/oracle/releases.py", "ensure", "all")
    _run(log, "bash", "tests/oracle/make_venv.sh", "0.5.9")


def bench_serving(log: Path) -> None:
    """SGLang's bench_serving venv and its tokenizer (the agreement tests)."""
    code = "from tests.unit.sweep_parts.bench_serving_env import ensure_bench_serving; ensure_bench_serving()"
    _run(log, PYTHON, "-c", code, env={**os.environ, "PYTHONPATH": str(REPO)})


def rootfs(log: Path) -> None:
    """The test hosts' root filesystems, bookworm and trixie (the suite boots both)."""
    for release in ("bookworm", "trixie"):
        env = {**os.environ, "TESTHOSTS_RELEASE": release}
        _run(log, "bash", "scripts/testhosts/testhosts.sh", "rootfs", env=env)


def builds() -> dict[str, Callable[[Path], None]]:
    found: dict[str, Callable[[Path], None]] = {"oracle": oracle, "bench-serving": bench_serving}
    # As tests/hosts/conftest.py decides: without root or nspawn the host tests skip.
    if os.geteuid() == 0 and (shutil.which("systemd-nspawn") or shutil.which("apt-get")):
        found["rootfs"] = rootfs
    return found


def _build(name: str, build: Callable[[Path], None]) -> str | None:
    log = LOGS / f"{name}.log"
    log.write_text("")
    start = time.monotonic()
    try:
        build(log)
    except subprocess.CalledProcessError as exc:
        tail = "\n".join(log.read_text().splitlines()[-20:])
        return f"build_prereqs: {name} failed (exit {exc.returncode}; {log}):\n{tail}"
    print(f"build_prereqs: {name} ready in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    return None


def main() -> int:
    LOGS.mkdir(parents=True, exist_ok=True)
    todo = builds()
    with ThreadPoolExecutor(max_workers=len(todo)) as pool:
        failures = [f for f in pool.map(lambda item: _build(*item), todo.items()) if f]
    for failure in failures:
        print(failure, file=sys.stderr)
    # A failed build fails the check; the tests still run and each says what it lacked.
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
