"""sgl_kernel_build: one build of a directory at a time, and a cancelled build stops.

Fault campaign (issue 20, item 11): SIGINT during the sgl-kernel build gave "provision
cancelled" in 2 s while the build went on on the host as an orphan for minutes; a re-run
started at once raced it in the same build directory, and the directory of an interrupted
build was never cleaned. Here the module runs as Ansible runs it on a node (a process with
its stdout a pipe to the controller's side), with a stand-in build: a process group of a
"pip" and its "compiler" child that would run for minutes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.provision import direct

pytestmark = pytest.mark.slow
FP = "3f9a0c1d2e4b"
FAKE_BUILD = f"""#!{sys.executable}
import os, subprocess, sys, time
out = os.environ["FAKE_BUILD_OUT"]
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", out])
with open(out + ".tmp", "w") as fh:
    fh.write(f"{{os.getpgid(0)}} {{os.getpid()}} {{child.pid}}")
os.rename(out + ".tmp", out)
time.sleep(300)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] != b"Z"


def wait_until(check, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[dict]:
    fake = tmp_path / "python"
    fake.write_text(FAKE_BUILD)
    fake.chmod(0o755)
    source = tmp_path / "sgl-kernel"
    source.mkdir()
    (source / "pyproject.toml").write_text("[project]\nname = 'sgl-kernel'\n")
    pids = tmp_path / "pids"
    args = {
        "python": str(fake),
        "source": str(source),
        "cache_dir": str(tmp_path / "wheels" / FP),
        "work_dir": str(tmp_path / "build" / FP),
        "jobs": 1,
        "environment": {"FAKE_BUILD_OUT": str(pids)},
    }
    info = {"args": args, "pids": pids, "tmp": tmp_path, "procs": []}
    yield info
    # Whatever happened, nothing this test started outlives it.
    for proc in info["procs"]:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if pids.exists():
        pgid, *rest = (int(x) for x in pids.read_text().split())
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
        for pid in rest:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def start_build(info: dict) -> tuple[subprocess.Popen, list[int]]:
    """The module building, its stdout a pipe to us (the controller's side of the connection)."""
    proc = subprocess.Popen(
        direct.argv("sgl_kernel_build", info["args"], info["tmp"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    info["procs"].append(proc)
    wait_until(lambda: info["pids"].exists() or proc.poll() is not None, "the build started")
    assert proc.poll() is None, proc.communicate()
    return proc, [int(x) for x in info["pids"].read_text().split()]


def test_a_second_build_is_refused_and_the_build_stops_when_the_controller_goes(setup: dict) -> None:
    proc, (pgid, pip, compiler) = start_build(setup)
    assert pgid != os.getpgid(proc.pid)  # the build runs in a process group of its own
    work = Path(setup["args"]["work_dir"])
    # A re-run while it builds: refused in one line naming the build, before touching anything.
    for mode in ("build", "claim"):
        res = direct.run("sgl_kernel_build", {**setup["args"], "mode": mode}, setup["tmp"])
        assert res.get("failed"), res
        assert res["msg"].startswith(f"a build of {FP} is already running (pid {pgid}, since "), res
        assert f") in {work}; wait for it" in res["msg"]
    assert alive(pip) and alive(compiler)
    # The controller is cancelled: its end of the module's stdout closes (as sshd's does).
    proc.stdout.close()
    proc.wait(timeout=60)
    wait_until(lambda: not alive(pip) and not alive(compiler), "the build's processes are gone")
    assert not work.exists()  # the interrupted build's directory is gone
    assert not list((setup["tmp"] / "wheels").glob("**/*.whl"))
    res = direct.run("sgl_kernel_build", {**setup["args"], "mode": "claim"}, setup["tmp"])
    assert not res.get("failed") and not res["changed"], res  # free again, nothing to clean


def test_a_signalled_build_says_it_was_cancelled(setup: dict) -> None:
    proc, (_pgid, pip, compiler) = start_build(setup)
    os.kill(proc.pid, signal.SIGTERM)
    out, _err = proc.communicate(timeout=60)
    assert "sgl-kernel build cancelled (got SIGTERM): its process group was stopped" in out.decode()
    assert not alive(pip) and not alive(compiler)
    assert not Path(setup["args"]["work_dir"]).exists()


def test_a_killed_module_takes_its_build_along_and_the_next_run_cleans_up(setup: dict) -> None:
    proc, (_pgid, pip, compiler) = start_build(setup)
    os.kill(proc.pid, signal.SIGKILL)  # no chance to clean up: the watchdog stops the group
    proc.wait()
    wait_until(lambda: not alive(pip) and not alive(compiler), "the build's processes are gone")
    work = Path(setup["args"]["work_dir"])
    assert work.is_dir()  # left behind, marked as interrupted
    check = direct.run(
        "sgl_kernel_build", {**setup["args"], "mode": "claim", "_ansible_check_mode": True}, setup["tmp"]
    )
    assert check["changed"] and work.is_dir()
    res = direct.run("sgl_kernel_build", {**setup["args"], "mode": "claim"}, setup["tmp"])
    assert res["changed"] and res["removed"] == str(work), res
    assert res["msg"] == f"removed what an interrupted build left in {work}"
    assert not work.exists()
