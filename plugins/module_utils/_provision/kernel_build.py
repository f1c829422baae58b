# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""How sgl-kernel is built and how a built wheel is checked, as argv lists and environments.

sgl-kernel builds with scikit-build-core + CMake, without build isolation (against the
stack venv's torch). Its GPU targets come from CMake options, not TORCH_CUDA_ARCH_LIST:
SGL_KERNEL_ENABLE_FP4 adds sm_120a (with CUDA >= 12.8), SGL_KERNEL_ENABLE_SM100A sm_100a.
A wheel is checked by reading the fatbinary headers of the shared libraries inside it
(fatbin.py): a library without sm_120a code would only fail at the first launch on SM120.
run_build runs the build in its own process group under WATCHDOG (it needs Popen, so it
lives here, not in the module: ansible-test use-run-command-not-popen).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import fatbin

# Build option -> CMake cache variable (booleans become ON/OFF).
CMAKE_OPTIONS = {
    "enable_fp4": "SGL_KERNEL_ENABLE_FP4",
    "enable_sm100a": "SGL_KERNEL_ENABLE_SM100A",
    "enable_sm90a": "SGL_KERNEL_ENABLE_SM90A",
    "enable_below_sm90": "ENABLE_BELOW_SM90",
    "enable_ccache": "ENABLE_CCACHE",
    "compile_threads": "SGL_KERNEL_COMPILE_THREADS",
}
DIST_NAMES = ("sglang_kernel", "sgl_kernel")  # wheel file name prefixes, new and old


def cmake_args(options: dict, extra: list[str] | None = None) -> list[str]:
    args = []
    for key, var in CMAKE_OPTIONS.items():
        if key not in options or options[key] is None:
            continue
        value = options[key]
        args.append(f"-D{var}={'ON' if value is True else 'OFF' if value is False else value}")
    return args + list(extra or [])


def required_targets(options: dict, extra: list[str] | None = None) -> list[str]:
    """The sm targets a build with these options must carry."""
    want = ["sm_120a"] if options.get("enable_fp4") else []
    if options.get("enable_sm100a"):
        want.append("sm_100a")
    return sorted(set(want) | set(extra or []))


def build_env(base: dict, jobs: int, args: list[str], nvcc: str | None) -> dict:
    env = dict(base)
    env["MAX_JOBS"] = str(jobs)
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    env["CMAKE_ARGS"] = " ".join(args)
    if nvcc:
        env["CUDACXX"] = nvcc
        bindir = os.path.dirname(nvcc)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def wheel_argv(python: str, source: str, outdir: str) -> list[str]:
    return [
        python,
        "-m",
        "pip",
        "wheel",
        "--no-build-isolation",
        "--no-deps",
        "--no-index",
        "--no-cache-dir",
        "-v",
        "-w",
        outdir,
        source,
    ]


def find_wheels(directory: str) -> list[str]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [
        os.path.join(directory, n)
        for n in names
        if n.endswith(".whl") and n.split("-", 1)[0].lower() in DIST_NAMES
    ]


def wheel_targets(wheel: str) -> dict:
    """fatbin.package_targets of the shared libraries inside a wheel (extracted to a temp dir)."""
    tmp = tempfile.mkdtemp(prefix="bwtune-wheel-")
    try:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                name = info.filename
                if (name.endswith(".so") or ".so." in name) and not name.startswith("/") and ".." not in name:
                    zf.extract(info, tmp)
        return fatbin.package_targets(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def missing_targets(targets: dict, required: list[str]) -> list[str]:
    return [t for t in required if t not in targets["sm"]]


def log_tail(path: str, lines: int = 25) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


# ----------------------------------------------------------------- one build at a time

MARKER = ".bwtune-build-running"  # in the work dir while a build runs; left behind = interrupted
GRACE_S = 10  # between SIGTERM and SIGKILL of a build's process group

# The build's process group leader: runs the build in its own group and, when the module
# that started it goes away for any reason (its end of the watch pipe closes: even SIGKILL),
# stops the whole group (cmake, ninja, nvcc are grandchildren). argv: watch-fd lock-fd cmd...
WATCHDOG = (
    r"""
import os, select, signal, subprocess, sys, time
watch, lock = int(sys.argv[1]), int(sys.argv[2])
child = subprocess.Popen(sys.argv[3:], pass_fds=(lock,))
while True:
    ready, _, _ = select.select([watch], [], [], 0.5)
    if child.poll() is not None:
        sys.exit(child.returncode if child.returncode >= 0 else 128 - child.returncode)
    if ready:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.killpg(0, signal.SIGTERM)
        deadline = time.monotonic() + %d
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        os.killpg(0, signal.SIGKILL)
"""
    % GRACE_S
)


class BuildRunning(Exception):
    """Another build holds the lock of this build directory."""


def lock_path(work_dir: str) -> str:
    """The lock beside the work dir (it outlives the dir's removal): <build_dir>/<fp>.lock."""
    return os.path.normpath(work_dir) + ".lock"


def _holder(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 200).decode("ascii", "replace").split()
    if len(text) >= 2 and text[0].isdigit() and text[1].isdigit():
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(text[1])))
        return f"pid {text[0]}, since {since}"
    return "pid unknown"


def running_message(work_dir: str, holder: str) -> str:
    name = os.path.basename(os.path.normpath(work_dir))
    return (
        f"a build of {name} is already running ({holder}) in {work_dir}; wait for it to finish "
        f"(it caches its wheel) or stop its process group, then run again"
    )


def take_lock(work_dir: str) -> int:
    """An fd holding the build directory's lock (flock, inherited by the build); BuildRunning if held."""
    path = lock_path(work_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = _holder(fd)
        os.close(fd)
        raise BuildRunning(running_message(work_dir, holder)) from None
    return fd


def probe_lock(work_dir: str) -> str | None:
    """Who holds the lock ("pid P, since T"), or None when no build runs. Creates nothing."""
    try:
        fd = os.open(lock_path(work_dir), os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _holder(fd)
    finally:
        os.close(fd)
    return None


def record_holder(fd: int, pid: int) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, f"{pid} {int(time.time())}\n".encode())


def interrupted(work_dir: str) -> bool:
    """Whether work_dir holds what a build left when it was interrupted (call with the lock free)."""
    return os.path.exists(os.path.join(work_dir, MARKER))


class Cancelled(Exception):
    """The build was stopped: the controller went away, or this module was signalled."""


def controller_gone(poller: select.poll) -> bool:
    """Whether the other end of our stdout (sshd, or Ansible's local worker) closed: the
    controller was cancelled or died, and no one will read our result."""
    return any(ev & (select.POLLERR | select.POLLHUP) for _fd, ev in poller.poll(0))


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the build's process group, then SIGKILL what is left of it (after GRACE_S
    at most; the leader's exit ends the wait, its grandchildren may linger)."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_build(argv: list[str], env: dict, log: str, lock_fd: int) -> int:
    """Run the build in its own process group under WATCHDOG, its output into `log`.

    Stops the whole group and raises Cancelled when the controller goes away (our stdout
    breaks), when our parent changes, or on SIGTERM/SIGHUP/SIGINT; should this process die
    without that (SIGKILL), the watchdog sees its pipe close and stops the group itself.
    """
    signals: list[str] = []
    handlers = {}
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        handlers[sig] = signal.signal(sig, lambda num, _frame: signals.append(signal.Signals(num).name))
    watch_r, watch_w = os.pipe()
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-c", WATCHDOG, str(watch_r), str(lock_fd), *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=(watch_r, lock_fd),
                start_new_session=True,
            )
        os.close(watch_r)
        record_holder(lock_fd, proc.pid)
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLERR | select.POLLHUP)
        parent = os.getppid()
        while proc.poll() is None:
            why = (
                f"got {signals[0]}"
                if signals
                else "the controller went away"
                if controller_gone(poller)
                else "its parent process exited"
                if os.getppid() != parent
                else None
            )
            if why:
                stop_group(proc)
                raise Cancelled(why)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)
        return proc.returncode
    finally:
        os.close(watch_w)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
