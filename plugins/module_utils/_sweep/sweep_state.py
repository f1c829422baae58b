# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The running sweep's state on the node: its progress file, its locks, its leftovers.

The sweep process rewrites ``<results>.progress.json`` atomically at every phase
change (its fields are declared in progress_fields); ``sweep_progress`` (and so the
controller's live view) reads it. It also names the sweep's pid and that process's start
time, so a reader can tell a live sweep from a dead one and a cancel never signals a recycled pid.

Two kernel locks (flock, released with the process, killed or not): ``<results>.lock``
(one sweep per results file) and the node lock in the results root (one sweep per node:
two would race for ports and GPU memory). Whoever holds the results lock may stop the
servers a dead sweep of that file left behind (``stop_leftovers``).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import re
import signal
import time
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import progress_fields, results_file
from ansible_collections.bwtune.sglang.plugins.module_utils._server import proc_scan, server_process

PHASES = ("planning", "starting", "gate", "workload", "stopping", "done")
NODE_LOCK = ".bwtune-node.lock"


class WriteFailed(RuntimeError):
    """A write on the node failed (a full or read-only disk); the message names the path."""


def progress_path(results_path: str) -> str:
    return results_path + ".progress.json"


def is_same_process(pid: int | None, start_ticks: int | None) -> bool:
    return bool(pid) and proc_scan.is_running(int(pid or 0), start_ticks)


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as src:
            data = json.load(src)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class Progress:
    """What the sweep process tells its followers; one per sweep process."""

    def __init__(self, results_path: str, run_id: str, planned: int) -> None:
        self.path = progress_path(results_path)
        pid = os.getpid()
        # Every field of progress_fields.FIELDS: this process's values over the initial ones.
        self.data: dict[str, Any] = progress_fields.new(
            run_id=run_id,
            pid=pid,
            pid_start_time=proc_scan.start_ticks_of(pid),
            # Who wrote this file, by identity, not by clock: the Ansible async job the sweep
            # runs in and the boot it runs in (progress_of_job). started_at is for people.
            async_job=async_job_prefix(),
            boot_id=boot_id(),
            started_at=time.time(),
            planned=planned,
        )
        self._launch_seconds: list = []
        self.save()

    def save(self) -> None:
        try:
            results_file.write_json_atomic(self.path, self.data)
        except OSError as exc:
            raise WriteFailed("cannot write %s: %s" % (self.path, exc.strerror or exc)) from None

    def phase(self, config_id: str, phase: str, workload: int = 0, workloads: int = 0) -> None:
        self.data["current"] = progress_fields.current(config_id, phase, workload, workloads)
        self.save()

    def config_done(self, failed: bool, seconds: float, planned: int | None = None) -> None:
        self.data["done"] += 1
        self.data["failed"] += int(failed)
        if planned is not None:
            self.data["planned"] = planned
        self._launch_seconds.append(seconds)
        left = max(self.data["planned"] - self.data["done"], 0)
        mean = sum(self._launch_seconds) / len(self._launch_seconds)
        self.data["eta_s"] = round(left * mean, 1)
        self.data["current"] = None
        self.save()

    def finish(self, result: dict[str, Any]) -> None:
        self.data.update(finished=True, current=None, eta_s=0, result=result)
        self.save()


def read_progress(results_path: str) -> dict[str, Any] | None:
    return read_json(progress_path(results_path))


_JOB_ARG = re.compile(r"j?[0-9]+")


def _cmdline(pid: int) -> list[str]:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as src:
            return [arg.decode("utf-8", "replace") for arg in src.read().split(b"\0") if arg]
    except OSError:
        return []


def _parent_of(pid: int) -> int:
    try:
        with open("/proc/%d/stat" % pid) as src:
            return int(src.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def async_job_prefix(pid: int | None = None, depth: int = 6) -> str | None:
    """The Ansible async job this process runs in, as the part of its job id before the dot
    (the job id is `<jid>.<pid>`, and the async wrapper, an ancestor, carries `<jid>` as its
    first argument), or None outside one."""
    pid = os.getppid() if pid is None else pid
    for _step in range(depth):
        if pid <= 1:
            return None
        args = _cmdline(pid)
        for n, arg in enumerate(args[:-1]):
            if os.path.basename(arg).startswith("async_wrapper") and _JOB_ARG.fullmatch(args[n + 1]):
                return args[n + 1]
        pid = _parent_of(pid)
    return None


def boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as src:
            return src.read().strip() or None
    except OSError:
        return None


def progress_of_job(progress: dict[str, Any] | None, job_id: str | None) -> bool | None:
    """Whether a progress file is the one the sweep of async job `job_id` writes: compared by
    identity (the job, the boot), never by wall-clock times (a clock stepped back between a
    killed run and its resume made an old file look newer than the new job). None when the
    file records no job (a sweep of an older bwtune, or one not run as an async job)."""
    if not progress or not job_id:
        return None
    booted = boot_id()
    if progress.get("boot_id") and booted and progress["boot_id"] != booted:
        return False  # written before the node's last boot: never this job's
    recorded = progress.get("async_job")
    if not recorded:
        return None
    return str(recorded) == str(job_id).split(".", 1)[0]


def node_lock_path(results_path: str) -> str:
    """The node lock: in the results root, the folder that holds every run's folder."""
    run_folder = os.path.dirname(os.path.abspath(results_path))
    return os.path.join(os.path.dirname(run_folder), NODE_LOCK)


def _try_flock(path: str) -> int | None:
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def hold_results(results_path: str) -> int | None:
    """The results file's lock (an fd to keep open), or None while a sweep holds it."""
    os.makedirs(os.path.dirname(os.path.abspath(results_path)), exist_ok=True)
    return _try_flock(results_path + ".lock")


def hold_node(path: str, holder: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
    """(fd, {}) with the node lock taken and `holder` written in it, or (None, the holder's
    own record) while another sweep holds it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = _try_flock(path)
    if fd is None:
        return None, read_json(path) or {}
    try:  # who holds it, for the next one's message; the lock works without it
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder, sort_keys=True).encode(), 0)
    except OSError:
        pass
    return fd, {}


def remove_stale_tmp(results_path: str) -> list[str]:
    """Remove the half-written temporary files a killed sweep of this results file left.

    Only the holder of the results lock calls this: no other writer of them runs.
    """
    removed = []
    for path in glob.glob(glob.escape(results_path) + ".*.tmp.*"):
        try:
            os.unlink(path)
        except OSError:
            continue
        removed.append(path)
    return removed


def stop_leftovers(results_path: str, **stop_kwargs: Any) -> dict[str, Any] | None:
    """Stop every server a dead sweep of this results file left running. Call with the
    results lock held (no live sweep of the file then has servers).

    Found by the in-flight record, and by the marker in their environment (a server the
    record does not name: the sweep was killed while it started it). Returns the first one
    stopped, as the summary shows it (with `others` counting the rest), or None.
    """
    results = results_file.ResultsFile(results_path)
    inflight = results.read_inflight() or {}
    stopped = []
    recorded = server_process.stop_leftover(inflight, **stop_kwargs) if inflight.get("pid") else None
    if recorded is not None:
        stopped.append(recorded)
    groups: dict[int, int] = {}  # process group -> one marked process of it
    marked = proc_scan.marked_pids(results_path)
    for pid in sorted(marked):
        try:
            groups.setdefault(os.getpgid(pid), pid)
        except ProcessLookupError:
            continue
    for pgid, pid in sorted(groups.items()):
        record = {
            "pid": pgid if pgid in marked else pid,
            "pgid": pgid,
            "host": inflight.get("host", "127.0.0.1"),
            "port": inflight.get("port", 0),
            "config_id": inflight.get("config_id"),
        }
        found = server_process.stop_leftover(record, **stop_kwargs)
        if found is not None:
            stopped.append(found)
    if inflight:
        with contextlib.suppress(OSError):
            results.clear_inflight()  # nothing of it runs any more
    if not stopped:
        return None
    first = dict(stopped[0])
    if len(stopped) > 1:
        first["others"] = len(stopped) - 1
    return first


def cancel(results_path: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """SIGTERM the sweep process named in the progress file and wait for it to end.

    The sweep stops its server and exits on SIGTERM; its results file keeps every
    config finished before. Returns what was done, for the module's result.
    """
    progress = read_progress(results_path)
    if not progress or progress.get("finished"):
        return {"cancelled": False, "reason": "no running sweep"}
    pid, start = int(progress.get("pid") or 0), progress.get("pid_start_time")
    if not is_same_process(pid, start):
        return {"cancelled": False, "reason": "the sweep process (pid %s) is not running" % pid}
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and is_same_process(pid, start):
        time.sleep(0.2)
    killed = is_same_process(pid, start)
    if killed:
        os.kill(pid, signal.SIGKILL)
    # A killed sweep could not stop its server: stop what it left.
    leftover = stop_leftovers_if_free(results_path)
    return {"cancelled": True, "killed": killed, "pid": pid, "leftover_stopped": leftover}


def stop_leftovers_if_free(results_path: str) -> dict[str, Any] | None:
    """stop_leftovers, unless a live sweep holds the results file (then its servers are its own)."""
    try:
        fd = hold_results(results_path)
    except OSError:
        return None
    if fd is None:
        return None
    try:
        return stop_leftovers(results_path)
    finally:
        os.close(fd)
