# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start an SGLang server, wait until it is healthy, classify why it failed, stop it for sure.

A server runs as its own process group and session (start_new_session), so stopping it
reaches every scheduler and detokenizer process it forked. Stopping is verified: no process
of the group left, the port closed, and the GPU memory its processes held released
(nvidia-smi). Anything left behind raises OrphanError: that is a failure of the sweep, not
of the config, because the next launch would run on a dirty GPU.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ansible_collections.bwtune.sglang.plugins.module_utils import failure_classifier

# Failure classes are the results contract's. AUTH_FAILED: a server refused the client's
# credentials (HTTP 401/403): the sweep's API key is not the server's, never "wrong-output".
from ansible_collections.bwtune.sglang.plugins.module_utils.results_contract import (
    AUTH_FAILED,
    COLD_START_PHASES,
)

LOG_TAIL_LINES = 50
# Every server a sweep starts carries this variable in its environment, set to the sweep's
# results file: a later run finds its servers in /proc even when no in-flight record names them.
SERVER_MARKER = "BWTUNE_SWEEP_RESULTS"
# One local directory for every compile/autotune cache a launch fills, so a launch reuses what
# earlier launches built (FlashInfer's JIT and autotune ~1.5 min uncached). The layout is the
# server role's (roles/server/templates/environment.j2, a unit test holds them equal), so the
# promoted server finds the sweep's caches warm. SGLang 0.5.7-0.5.23 overwrite DG_JIT_CACHE_DIR
# with SGLANG_DG_CACHE_DIR (deep_gemm_wrapper/compile_utils.py), so both are set; from 0.5.15
# SGLANG_CACHE_DIR also holds FlashInfer's autotune results (runner/flashinfer_autotune.py).
STARTUP_CACHE_LAYOUT = (
    ("XDG_CACHE_HOME", ""),
    ("FLASHINFER_WORKSPACE_BASE", ""),  # FlashInfer appends .cache/flashinfer itself
    ("SGLANG_CACHE_DIR", ""),
    ("TRITON_CACHE_DIR", "triton"),
    ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
    ("CUDA_CACHE_PATH", "nv"),
    ("SGLANG_DG_CACHE_DIR", "deep_gemm"),
    ("DG_JIT_CACHE_DIR", "deep_gemm"),
)


def startup_cache_env(cache_dir: str | None) -> dict[str, str]:
    """The environment that points every start-up cache at `cache_dir` ({} when none)."""
    if not cache_dir:
        return {}
    root = os.path.abspath(os.path.expanduser(cache_dir))
    return {name: os.path.join(root, sub) if sub else root for name, sub in STARTUP_CACHE_LAYOUT}


# The bind error of a server whose port was taken between the check and its bind (uvicorn's
# wording, and the errno's): the launch is retried on another port, it is not the config's fault.
_ADDRESS_IN_USE = re.compile(r"address already in use|\[Errno 98\]|EADDRINUSE", re.I)


class OrphanError(RuntimeError):
    """A stopped server left processes, its port or GPU memory behind."""


@dataclass
class ColdStart:
    """Where a launch's start-up time went, on the monotonic clock from the process's start:
    the results line's `cold_start` (results_contract.COLD_START_SECONDS says what each
    phase means). Each phase keeps its first time; the health poll's interval bounds how
    late the listening and health phases can be seen."""

    started: float = field(default_factory=time.monotonic)
    listening: float | None = None
    health: float | None = None
    ready: float | None = None
    first_token: float | None = None
    failed: float | None = None

    def mark(self, phase: str, at: float | None = None) -> None:
        """Record that `phase` was reached (now, or at monotonic time `at`); the first time stays.

        A later phase implies the earlier ones (a server seen healthy at once was listening)."""
        if phase not in COLD_START_PHASES[1:]:
            raise ValueError("unknown cold-start phase %r" % phase)
        at = time.monotonic() if at is None else at
        for earlier in COLD_START_PHASES[1 : COLD_START_PHASES.index(phase) + 1]:
            if getattr(self, earlier) is None:
                setattr(self, earlier, at)

    def mark_failed(self) -> None:
        if self.failed is None:
            self.failed = time.monotonic()

    def reached(self) -> str:
        return next(
            (phase for phase in reversed(COLD_START_PHASES[1:]) if getattr(self, phase) is not None),
            COLD_START_PHASES[0],
        )

    def as_dict(self) -> dict[str, Any]:
        """The results line's `cold_start`: seconds since the start (ms), null where not reached."""

        def since(at: float | None) -> float | None:
            return None if at is None else round(max(0.0, at - self.started), 3)

        return {
            "process_to_listen_s": since(self.listening),
            "to_health_s": since(self.health),
            "to_ready_s": since(self.ready),
            "to_first_token_s": since(self.first_token),
            "failed_after_s": since(self.failed),
            "reached": self.reached(),
        }


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
class HealthResult:
    ok: bool
    elapsed_s: float
    failure_class: str | None = None
    message: str = ""


@dataclass
class StopResult:
    elapsed_s: float
    forced: bool  # SIGKILL was needed
    port_closed: bool
    gpu_check: str  # "released (N MiB)", "not held", or "skipped: <why>"
    returncode: int | None = None


# ---------------------------------------------------------------- /proc helpers (Linux)


def _proc_stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """(state, ppid, pgrp, session, starttime) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    rest = raw[raw.rfind(b")") + 2 :].split()
    return rest[0].decode(), int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19])


def _proc_environ(pid: int) -> dict[bytes, bytes]:
    """The environment a process started with ({} if gone or not ours to read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0") if entry)
    return {name: value for name, _eq, value in pairs}


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def start_ticks_of(pid: int) -> int | None:
    """The kernel's start time of a live process: with the pid, it names the process for good."""
    st = _proc_stat(pid)
    return None if st is None or st[0] in ("Z", "X") else st[4]


def is_running(pid: int, start_ticks: int | None) -> bool:
    """The process that had this start time still runs (a recycled pid is not it)."""
    return start_ticks is not None and _alive(pid, start_ticks)


def _alive(pid: int, start_ticks: int | None = None) -> bool:
    st = _proc_stat(pid)
    if st is None:
        if start_ticks is not None or os.path.isdir("/proc/self"):
            return False
        try:  # no /proc: fall back to signal 0
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if st[0] in ("Z", "X"):
        return False
    return start_ticks is None or st[4] == start_ticks


def _all_pids() -> list[int]:
    try:
        return [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []


def group_members(pgid: int, leader: int | None = None, min_start: int | None = None) -> set[int]:
    """Live processes of a server: its process group and session, plus the leader's descendants
    (a child that moved to a new group is still found). Processes that started before the
    leader cannot be its children: that excludes a recycled pid."""
    stats = {}
    for pid in _all_pids():
        st = _proc_stat(pid)
        if st is not None and st[0] not in ("Z", "X"):
            stats[pid] = st
    # Linux never hands out a pid still used as a group or session id, so if a process with
    # pid == pgid runs but started at another time, the whole group is someone else's.
    leader_st = stats.get(pgid)
    if min_start is not None and leader_st is not None and leader_st[4] != min_start:
        return set()
    members = {
        pid
        for pid, (_state, _ppid, pgrp, sess, start) in stats.items()
        if (pgrp == pgid or sess == pgid) and (min_start is None or start >= min_start)
    }
    if leader is not None and leader in stats:
        children: dict[int, list[int]] = {}
        for pid, st in stats.items():
            children.setdefault(st[1], []).append(pid)
        todo = [leader]
        while todo:
            p = todo.pop()
            if p in stats and (min_start is None or stats[p][4] >= min_start):
                members.add(p)
                todo.extend(children.get(p, []))
    members.discard(os.getpid())
    return members


def marked_pids(marker: str) -> set[int]:
    """Live processes started with SERVER_MARKER=marker in their environment (servers of one
    results file, and every process they forked)."""
    want = marker.encode()
    found = set()
    for pid in _all_pids():
        if pid == os.getpid():
            continue
        st = _proc_stat(pid)
        if st is None or st[0] in ("Z", "X"):
            continue
        if _proc_environ(pid).get(SERVER_MARKER.encode()) == want:
            found.add(pid)
    return found


# ---------------------------------------------------------------- start and health


def start_server(
    argv: Sequence[str],
    *,
    host: str = "127.0.0.1",
    port: int = 30000,
    log_path: str,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> ServerHandle:
    """Start argv as its own session and process group, output to log_path.

    `env` entries are added to this process's environment (secrets in it never reach the log).
    """
    if not argv:
        raise ValueError("start_server: empty argv")
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    full_env = dict(os.environ)
    if env:
        full_env.update({str(k): str(v) for k, v in env.items()})
    with open(log_path, "wb") as log:
        cold_start = ColdStart()
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
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


def http_status(host: str, port: int, path: str, timeout: float, api_key: str | None = None) -> int:
    """The HTTP status of GET `path`, 0 when nothing answers (the sweep and the server role share it)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        conn.close()


def wait_healthy(
    handle: ServerHandle,
    *,
    timeout_s: float,
    poll_s: float = 0.5,
    api_key: str | None = None,
) -> HealthResult:
    """Wait for GET /health then GET /health_generate to answer 200.

    Fails fast when the process exits (classified from its log) and gives up after timeout_s.
    Marks the phases it sees on `handle.cold_start` (listening, health, ready; failed).
    """
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    health_ok = False
    cold = handle.cold_start

    def failed(cls: str | None, msg: str) -> HealthResult:
        cold.mark_failed()
        return HealthResult(False, time.monotonic() - t0, cls, msg)

    while True:
        code = handle.exit_code()
        if code is not None:
            cls, msg = classify_failure(log_tail(handle.log_path, 400), exited=True, returncode=code)
            return failed(cls, msg)
        left = deadline - time.monotonic()
        if left <= 0:
            cls, msg = classify_failure(log_tail(handle.log_path, 400), exited=False, returncode=None)
            if cls == "startup-timeout":
                msg = (
                    f"not healthy after {timeout_s:g} s ({msg})"
                    if msg
                    else f"not healthy after {timeout_s:g} s"
                )
            return failed(cls, msg)
        if not health_ok:
            status = http_status(handle.host, handle.port, "/health", min(5.0, left), api_key)
            if status != 0:
                cold.mark("listening")
            # 404: a server without /health; /health_generate decides.
            health_ok = status in (200, 404)
            if status == 200:
                cold.mark("health")
        if health_ok:
            path = "/health_generate"
            status = http_status(handle.host, handle.port, path, min(60.0, left), api_key)
            if status == 200:
                cold.mark("health")
                # /health* answer without a key: ask one route that needs it.
                path = "/v1/models"
                status = http_status(handle.host, handle.port, path, min(60.0, left), api_key)
            if status in (401, 403):
                message = auth_message(status, path, api_key)
                return failed(AUTH_FAILED, message)
            if status != 0 and path == "/v1/models":
                cold.mark("ready")
                return HealthResult(True, time.monotonic() - t0)
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))


def auth_message(status: int, path: str, api_key: str | None) -> str:
    sent = "with the sweep's API key" if api_key else "without an API key"
    return (
        f"HTTP {status} on {path} {sent}: the server wants another key; set it in sweep_api_key"
        " (never in the matrix or the launch command)"
    )


def address_in_use(lines: Sequence[str]) -> bool:
    """The server could not bind its port: another process took it after the port was chosen."""
    return any(_ADDRESS_IN_USE.search(line) for line in lines)


def classify_failure(lines: Sequence[str], *, exited: bool, returncode: int | None) -> tuple[str, str]:
    """(failure class, the log line that shows it) for a server that did not become healthy.

    Read from the traceback (frames, exception, SGLang's phrases): failure_classifier.py."""
    return failure_classifier.classify_failure(lines, exited=exited, returncode=returncode)


def log_tail(path: str, n: int = LOG_TAIL_LINES, max_bytes: int = 256 * 1024) -> list[str]:
    """The last n lines of a log (decoded leniently), or [] if it does not exist."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").replace("\r", "\n").split("\n")
    if size > max_bytes:
        lines = lines[1:]  # the first line is cut
    while lines and not lines[-1].strip():
        lines.pop()
    return lines[-n:]


# ---------------------------------------------------------------- stop


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
