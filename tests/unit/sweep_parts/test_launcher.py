"""The launcher with real processes: start, health, failure classes, stop for sure, leftovers."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._server import health_wait, launcher, proc_scan
from ansible_collections.bwtune.sglang.plugins.module_utils._server.launcher import (
    OrphanError,
    classify_failure,
    find_leftover,
    log_tail,
    port_open,
    start_server,
    stop_server,
    wait_healthy,
)

HERE = Path(__file__).parent
FAKE = str(HERE / "fake_server.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def alive(pid: int) -> bool:
    return proc_scan._alive(pid)


@pytest.fixture
def gpu(tmp_path, monkeypatch):
    """Put the fake nvidia-smi first on PATH; processes register as GPU users in a state file."""
    monkeypatch.setenv("PATH", f"{HERE}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GPU_STATE", str(tmp_path / "gpu.jsonl"))
    monkeypatch.setenv("FAKE_GPU_CALLS", str(tmp_path / "calls.log"))
    return tmp_path


@pytest.fixture
def no_gpu_tool(tmp_path, monkeypatch):
    empty = tmp_path / "emptybin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.fixture
def started():
    """Start fake servers; whatever a test leaves running is killed at the end."""
    handles: list[launcher.ServerHandle] = []

    def start(tmp_path: Path, *opts: str) -> launcher.ServerHandle:
        port = free_port()
        h = start_server(
            [sys.executable, FAKE, "--port", str(port), *opts],
            port=port,
            log_path=str(tmp_path / "logs" / f"server-{port}.log"),
        )
        handles.append(h)
        return h

    yield start
    for h in handles:
        for pid in launcher.group_members(h.pgid, h.pid, h.start_ticks) | {h.pid}:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        if h.proc is not None:
            h.proc.wait()


def test_healthy_server_starts_and_stops_with_gpu_memory_released(gpu, started):
    h = started(gpu, "--mode", "healthy")
    assert os.getpgid(h.pid) == h.pid and os.getsid(h.pid) == h.pid  # its own group and session
    r = wait_healthy(h, timeout_s=20, poll_s=0.05)
    assert r.ok and r.failure_class is None
    s = stop_server(h, grace_s=5)
    assert not s.forced and s.port_closed and not alive(h.pid)
    assert s.gpu_check == "released (1234 MiB)"
    assert not port_open("127.0.0.1", h.port)
    assert "--query-compute-apps=pid,used_memory,gpu_uuid" in (gpu / "calls.log").read_text()


def test_a_port_another_process_answers_on_is_a_lost_port_not_the_servers_health(tmp_path, no_gpu_tool):
    # Another process (here this test) took the chosen port and answers 200 everywhere while
    # the server still loads (it never binds): its health must not be the server's, or the
    # sweep would measure the other process for this config.
    import http.server
    import threading

    class Answer200(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer200)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = other.server_address[1]
    h = start_server(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        port=port,
        log_path=str(tmp_path / "logs" / "loading.log"),
    )
    try:
        assert launcher.listener_is_ours(h) is False
        r = wait_healthy(h, timeout_s=20, poll_s=0.05)
        assert not r.ok and r.failure_class == launcher.PORT_TAKEN
        assert r.message == f"another process answers on port {port}"
    finally:
        stop_server(h, grace_s=2, check_port=False)
        other.shutdown()
        other.server_close()
    assert not alive(h.pid)


def test_the_servers_own_listener_is_its_own(gpu, started):
    h = started(gpu, "--mode", "healthy")
    assert wait_healthy(h, timeout_s=20, poll_s=0.05).ok
    assert launcher.listener_is_ours(h) is True
    stop_server(h, grace_s=5)
    assert launcher.listener_is_ours(h) is None  # nothing listens there any more


def test_sigterm_ignored_means_sigkill_after_grace(gpu, started):
    h = started(gpu, "--mode", "healthy", "--ignore-term")
    assert wait_healthy(h, timeout_s=20, poll_s=0.05).ok
    t0 = time.monotonic()
    s = stop_server(h, grace_s=0.5)
    assert s.forced and s.returncode == -9
    assert time.monotonic() - t0 >= 0.5
    assert not alive(h.pid) and not port_open("127.0.0.1", h.port)


def test_grandchildren_are_stopped_too_even_one_that_left_the_group(gpu, started):
    h = started(gpu, "--mode", "healthy", "--grandchild", "--escape")
    assert wait_healthy(h, timeout_s=20, poll_s=0.05).ok
    log = Path(h.log_path).read_text()
    kids = [int(line.split()[1]) for line in log.splitlines() if line.startswith(("grandchild", "escaped"))]
    assert len(kids) == 2 and all(alive(k) for k in kids)
    s = stop_server(h, grace_s=0.5)
    assert s.forced  # the helpers ignore SIGTERM
    assert not any(alive(k) for k in kids)
    assert launcher.group_members(h.pgid) == set()
    assert s.gpu_check == "released (2468 MiB)"


def test_gpu_memory_never_released_is_an_orphan(gpu, started, monkeypatch):
    h = started(gpu, "--mode", "healthy")
    assert wait_healthy(h, timeout_s=20, poll_s=0.05).ok
    # h.pid leads the server's group (the masking writer); the server is its child.
    (server,) = launcher.group_members(h.pgid) - {h.pid}
    monkeypatch.setenv("FAKE_GPU_STUCK", str(server))
    with pytest.raises(OrphanError, match=rf"GPU memory still held .*{server}: 1234"):
        stop_server(h, grace_s=2, release_timeout_s=0.5)


def test_without_nvidia_smi_the_gpu_check_is_skipped_and_says_so(tmp_path, no_gpu_tool, started):
    h = started(tmp_path, "--mode", "healthy")
    assert wait_healthy(h, timeout_s=20, poll_s=0.05).ok
    s = stop_server(h, grace_s=5)
    assert s.gpu_check == "skipped: nvidia-smi not found"
    assert not alive(h.pid)


@pytest.mark.parametrize(
    ("mode", "cls", "needle"),
    [
        ("argparse", "invalid-args", "invalid choice: 'bogus'"),
        ("value-error", "invalid-args", "ValueError: speculative decoding needs"),
        ("oom", "oom", "CUDA out of memory"),
        ("no-kernel", "unsupported-hardware", "no kernel image is available"),
        ("crash-after-load", "crashed", "exit status 1"),
    ],
)
def test_start_failures_are_classified_fast(tmp_path, no_gpu_tool, started, mode, cls, needle):
    h = started(tmp_path, "--mode", mode)
    r = wait_healthy(h, timeout_s=30, poll_s=0.05)
    assert not r.ok and r.failure_class == cls
    assert needle in r.message
    assert r.elapsed_s < 30  # noticed the exit, did not wait for the timeout (30 s)


def test_startup_timeout_when_never_healthy(tmp_path, no_gpu_tool, started, monkeypatch):
    h = started(tmp_path, "--mode", "hang")
    # The deadline on a clock that only its own sleeps move: how fast the machine is plays no part.
    now = [0.0]
    clock = SimpleNamespace(monotonic=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    with monkeypatch.context() as m:
        m.setattr(health_wait, "time", clock)
        r = wait_healthy(h, timeout_s=1.0, poll_s=0.05)
    assert not r.ok and r.failure_class == "startup-timeout"
    assert r.message.startswith("not healthy after 1 s")
    assert r.elapsed_s == pytest.approx(1.0, abs=1e-9)  # gave up at the deadline: not before, not after
    stop_server(h, grace_s=2)
    assert not alive(h.pid)


def test_env_reaches_the_server(tmp_path, no_gpu_tool):
    log = tmp_path / "env.log"
    h = start_server(
        [sys.executable, "-c", "import os; print(os.environ['BWTUNE_X'])"],
        port=free_port(),
        log_path=str(log),
        env={"BWTUNE_X": "hello"},
    )
    assert h.proc is not None and h.proc.wait(10) == 0
    assert log.read_text() == "hello\n"


def test_leftover_server_of_a_previous_run_is_found_and_stopped(tmp_path, no_gpu_tool, started):
    h = started(tmp_path, "--mode", "healthy", "--grandchild")
    assert wait_healthy(h, timeout_s=20, poll_s=0.05).ok
    record = h.record()
    found = find_leftover(record)
    assert found is not None and found.proc is None and found.pid == h.pid
    stop_server(found, grace_s=0.5)
    assert h.proc is not None
    h.proc.wait(5)
    assert not port_open("127.0.0.1", h.port)
    assert launcher.group_members(h.pgid) == set()
    # once stopped, the same record finds nothing
    assert find_leftover(record) is None


def test_recycled_pid_or_other_boot_is_not_a_leftover(tmp_path, no_gpu_tool, started):
    h = started(tmp_path, "--mode", "healthy")
    rec = h.record()
    assert rec["start_ticks"] is not None
    assert find_leftover({**rec, "start_ticks": rec["start_ticks"] - 1}) is None  # same pid, other process
    assert find_leftover({**rec, "boot_id": "another-boot"}) is None
    assert find_leftover({"pid": "x"}) is None
    assert alive(h.pid)  # none of these touched it


def test_classify_failure_prefers_oom_and_ignores_errors_after_load():
    lines = ["Load weight begin. avail mem=94 GB", "ValueError: bad shape", "CUDA out of memory. Tried"]
    assert classify_failure(lines, exited=True, returncode=1)[0] == "oom"
    assert classify_failure(lines[:2], exited=True, returncode=1)[0] == "crashed"
    assert classify_failure(["ValueError: bad flag"], exited=True, returncode=1) == (
        "invalid-args",
        "ValueError: bad flag",
    )
    hw = ["NotImplementedError: trtllm-gen MoE kernels are SM100-only"]
    assert classify_failure(hw, exited=True, returncode=1)[0] == "unsupported-hardware"
    assert classify_failure(["loading..."], exited=False, returncode=None) == (
        "startup-timeout",
        "loading...",
    )


def test_log_tail_returns_the_last_lines(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("".join(f"line {i}\n" for i in range(200)))
    tail = log_tail(str(p))
    assert len(tail) == 50 and tail[0] == "line 150" and tail[-1] == "line 199"
    assert log_tail(str(tmp_path / "missing.log")) == []


def test_stop_leftover_from_the_inflight_marker_file(tmp_path, no_gpu_tool, started):
    from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_file import ResultsFile

    rf = ResultsFile(str(tmp_path / "results.jsonl"))
    h = started(tmp_path, "--mode", "healthy")
    assert wait_healthy(h, timeout_s=20, poll_s=0.05).ok
    rf.mark_inflight(dict(h.record(), config_id="c0123456789"))
    stopped = launcher.stop_leftover(rf.inflight_path, grace_s=2)
    assert stopped is not None
    assert stopped["config_id"] == "c0123456789" and stopped["pid"] == h.pid
    assert stopped["gpu_check"] == "skipped: nvidia-smi not found"
    assert not alive(h.pid)
    assert launcher.stop_leftover(rf.inflight_path) is None  # nothing left to stop
    assert launcher.stop_leftover(str(tmp_path / "missing.json")) is None


@pytest.mark.slow  # waits on a stand-in's simulated start-up or release delay (2-4 s)
def test_a_marked_server_and_its_children_are_found_by_their_environment(tmp_path, no_gpu_tool):
    port = free_port()
    h = start_server(
        [sys.executable, FAKE, "--port", str(port), "--mode", "healthy", "--grandchild"],
        port=port,
        log_path=str(tmp_path / "marked.log"),
        env={launcher.SERVER_MARKER: str(tmp_path / "results.jsonl")},
    )
    try:
        assert wait_healthy(h, timeout_s=20, poll_s=0.05).ok
        found = launcher.marked_pids(str(tmp_path / "results.jsonl"))
        # The masking writer that leads the group, the server and the helper it forked.
        assert h.pid in found and len(found) == 3
        assert launcher.marked_pids(str(tmp_path / "other.jsonl")) == set()
    finally:
        stop_server(h, grace_s=2)
    assert launcher.marked_pids(str(tmp_path / "results.jsonl")) == set()


def test_a_port_lost_to_another_process_is_told_from_a_crash():
    assert launcher.address_in_use(
        [
            "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): "
            "address already in use"
        ]
    )
    assert not launcher.address_in_use(["RuntimeError: CUDA error: an illegal memory access was encountered"])
