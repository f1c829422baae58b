# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Start a server as its own process group and stop it for sure: processes, port and GPU memory released."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.cold_start import ColdStart
from ansible_collections.bwtune.sglang.plugins.module_utils._server.log_masker import (
    MASKER_SOURCE,
    private_dirs,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._server.proc_scan import (
    _alive,
    _boot_id,
    _proc_stat,
    group_members,
)


class OrphanError(RuntimeError):
    """A stopped server left processes, its port or GPU memory behind."""


def _executable(argv0: str, env: Mapping[str, str]) -> str:
    """What exec would run for argv0, or the OSError Popen would raise (a command not found is
    the sweep's failure, not a config's)."""
    found = argv0 if os.sep in argv0 else shutil.which(argv0, path=env.get("PATH", os.defpath))
    if found is None or not os.path.isfile(found):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv0)
    if not os.access(found, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), argv0)
    return found


@dataclass
class ServerHandle:
    """A started server. `record()` is what a later run needs to find it again."""

    argv: list[str]
    host: str
    port: int
    log_path: str
    pid: int
    pgid: int
    start_ticks: int | None  # /proc/<pid>/stat starttime: tells a recycled pid apart
    boot_id: str | None
    started_at: float
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)
    # Measured from just before the process is created (a found leftover: from when it was found).
    cold_start: ColdStart = field(default_factory=ColdStart, repr=False, compare=False)

    def record(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "pgid": self.pgid,
            "start_ticks": self.start_ticks,
            "boot_id": self.boot_id,
            "host": self.host,
            "port": self.port,
            "log_path": self.log_path,
            "started_at": self.started_at,
        }

    def exit_code(self) -> int | None:
        if self.proc is not None:
            return self.proc.poll()
        return None if _alive(self.pid, self.start_ticks) else -1


@dataclass
class StopResult:
    elapsed_s: float
    forced: bool  # SIGKILL was needed
    port_closed: bool
    gpu_check: str  # "released (N MiB)", "not held", or "skipped: <why>"
    returncode: int | None = None


def start_server(
    argv: Sequence[str],
    *,
    host: str = "127.0.0.1",
    port: int = 30000,
    log_path: str,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    secrets: Sequence[str] = (),
) -> ServerHandle:
    """Start argv as its own session and process group, output to log_path.

    `env` entries are added to this process's environment. The log (0600, in a 0700 folder) is
    written by the masking writer (MASKER_SOURCE), the session's leader and the server's
    parent: every value of `secrets` is masked before it reaches the disk, since a server may
    print its arguments (SGLang logs its ServerArgs, the API key included). Masked as the
    output streams, not when the server stops: a killed sweep leaves nothing unmasked behind.
    The handle's pid is the writer's; the server is its only child, in its group.
    """
    if not argv:
        raise ValueError("start_server: empty argv")
    private_dirs(os.path.dirname(os.path.abspath(log_path)))
    full_env = dict(os.environ)
    if env:
        full_env.update({str(k): str(v) for k, v in env.items()})
    _executable(argv[0], full_env)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    secrets_read, secrets_write = os.pipe()
    try:
        os.fchmod(log_fd, 0o600)  # a log kept from an earlier launch keeps its old mode otherwise
        # Through the pipe, not argv or the environment (/proc shows both).
        os.write(secrets_write, json.dumps(sorted({str(s) for s in secrets if s})).encode())
        os.close(secrets_write)
        secrets_write = -1
        cold_start = ColdStart()
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", MASKER_SOURCE, str(secrets_read), str(log_fd), *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            pass_fds=(secrets_read, log_fd),
        )
    finally:
        for fd in (log_fd, secrets_read, secrets_write):
            if fd >= 0:
                os.close(fd)
    st = _proc_stat(proc.pid)
    return ServerHandle(
        argv=list(argv),
        host=host,
        port=port,
        log_path=log_path,
        pid=proc.pid,
        pgid=proc.pid,  # start_new_session: the child leads its own session and group
        start_ticks=st[4] if st else None,
        boot_id=_boot_id(),
        started_at=time.time(),
        proc=proc,
        cold_start=cold_start,
    )


def gpu_processes(nvidia_smi: str = "nvidia-smi") -> dict[int, int] | str:
    """{pid: MiB used} of processes on any GPU, or a string saying why it could not be read."""
    exe = shutil.which(nvidia_smi)
    if exe is None:
        return f"skipped: {nvidia_smi} not found"
    try:
        out = subprocess.run(
            [exe, "--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"skipped: {nvidia_smi} failed: {exc}"
    if out.returncode != 0:
        return f"skipped: {nvidia_smi} exited {out.returncode}: {(out.stderr or out.stdout).strip()[:200]}"
    held: dict[int, int] = {}
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            mib = int(parts[1]) if parts[1].isdigit() else 0
            held[int(parts[0])] = held.get(int(parts[0]), 0) + mib
    return held


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _signal_all(pgid: int, pids: set[int], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _wait_gone(handle: ServerHandle, pids: set[int], timeout_s: float) -> set[int]:
    """Wait until every process is gone (reaping our own child); return those still alive."""
    deadline = time.monotonic() + timeout_s
    while True:
        if handle.proc is not None:
            handle.proc.poll()
        pids |= group_members(handle.pgid, handle.pid, handle.start_ticks)
        alive = {p for p in pids if _alive(p)}
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def stop_server(
    handle: ServerHandle,
    *,
    grace_s: float = 30.0,
    kill_wait_s: float = 10.0,
    release_timeout_s: float = 60.0,
    nvidia_smi: str = "nvidia-smi",
    check_port: bool = True,
) -> StopResult:
    """SIGTERM the group, SIGKILL after grace_s, then verify that processes, port and GPU memory
    are released. Raises OrphanError if anything is left. `check_port=False` for a server that
    never bound its port (another process holds it)."""
    t0 = time.monotonic()
    pids = group_members(handle.pgid, handle.pid, handle.start_ticks)
    if _alive(handle.pid, handle.start_ticks):
        pids.add(handle.pid)
    seen = set(pids)
    held_before = gpu_processes(nvidia_smi)
    _signal_all(handle.pgid, pids, signal.SIGTERM)
    alive = _wait_gone(handle, pids, grace_s)
    seen |= pids
    forced = bool(alive)
    if alive:
        _signal_all(handle.pgid, alive, signal.SIGKILL)
        alive = _wait_gone(handle, alive, kill_wait_s)
        seen |= alive
    if alive:
        raise OrphanError(
            f"server on port {handle.port} (pgid {handle.pgid}): processes {sorted(alive)} survive SIGKILL"
        )
    returncode = handle.proc.wait() if handle.proc is not None else None

    deadline = time.monotonic() + release_timeout_s
    while check_port and port_open(handle.host, handle.port):
        if time.monotonic() >= deadline:
            raise OrphanError(
                f"port {handle.host}:{handle.port} still open {release_timeout_s:g} s after stop"
            )
        time.sleep(0.1)

    if isinstance(held_before, str):
        gpu_check = held_before
    else:
        ours = {p: mib for p, mib in held_before.items() if p in seen}
        gpu_check = f"released ({sum(ours.values())} MiB)" if ours else "not held"
        while True:
            held = gpu_processes(nvidia_smi)
            still = {p: held[p] for p in sorted(seen & set(held))} if isinstance(held, dict) else {}
            if not still:
                break
            if time.monotonic() >= deadline:
                raise OrphanError(
                    f"GPU memory still held {release_timeout_s:g} s after stop: {still} (pid: MiB)"
                )
            time.sleep(0.2)
    return StopResult(
        elapsed_s=time.monotonic() - t0,
        forced=forced,
        port_closed=True,
        gpu_check=gpu_check,
        returncode=returncode,
    )


def find_leftover(record: Mapping[str, Any]) -> ServerHandle | None:
    """A server a previous run started and did not stop, from its in-flight record.

    It is ours only if the same boot and either the recorded pid with its recorded start time
    is alive, or processes of its group that started after it are. A recycled pid is not.
    """
    try:
        pid, pgid = int(record["pid"]), int(record["pgid"])
    except (KeyError, TypeError, ValueError):
        return None
    start = record.get("start_ticks")
    boot = record.get("boot_id")
    if boot and _boot_id() and boot != _boot_id():
        return None  # rebooted since: nothing of it survives
    start_ticks = int(start) if start is not None else None
    if not _alive(pid, start_ticks) and not group_members(pgid, None, start_ticks):
        return None
    if start_ticks is None and not _alive(pid):
        return None
    return ServerHandle(
        argv=[],
        host=str(record.get("host", "127.0.0.1")),
        port=int(record.get("port", 0)),
        log_path=str(record.get("log_path", "")),
        pid=pid,
        pgid=pgid,
        start_ticks=start_ticks,
        boot_id=boot,
        started_at=float(record.get("started_at", 0.0)),
    )


def stop_leftover(record: Mapping[str, Any] | str, **stop_kwargs: Any) -> dict[str, Any] | None:
    """Stop a leftover server from an in-flight record (or the path of the JSON file holding
    one). Returns what was stopped, JSON-ready, or None when nothing of it runs.
    Raises OrphanError if it cannot be stopped."""
    if isinstance(record, str):
        try:
            with open(record) as f:
                loaded = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(loaded, dict):
            return None
        record = loaded
    handle = find_leftover(record)
    if handle is None:
        return None
    result = stop_server(handle, **stop_kwargs)
    return {
        "config_id": record.get("config_id"),
        "pid": handle.pid,
        "pgid": handle.pgid,
        "port": handle.port,
        "forced": result.forced,
        "gpu_check": result.gpu_check,
        "stop_s": round(result.elapsed_s, 3),
    }
