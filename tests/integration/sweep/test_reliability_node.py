"""The node's sweep under the fault campaign's node-side cases (docs/reliability.md), on the
stand-in: a kill between a server's start and its record, a full disk mid-launch, a second
sweep on the node, a lost port race, a server that refuses the sweep's key.

The sweep runs in this process (or, where it must be killed, in a child) with the same
private node as the playbook tests (conftest.Node)."""

from __future__ import annotations

import errno
import http.server
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._server import launcher
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import (
    config_launch,
    sweep_runner,
    sweep_state,
)

from .conftest import Node, read_lines

STANDIN = [sys.executable, "-m", "bwtune.standin"]
STANDIN_ENV = ("BWTUNE_STANDIN_PROFILE", "BWTUNE_STANDIN_STARTUP_SCALE", "BWTUNE_STANDIN_STATE_DIR")


@pytest.fixture
def on_node(node: Node, monkeypatch: pytest.MonkeyPatch) -> Node:
    """This process as the node's sweep: the node's PATH (fake nvidia-smi) and stand-in state."""
    for key in ("PATH", *STANDIN_ENV):
        monkeypatch.setenv(key, node.env[key])
    return node


def options(node: Node, run_id: str, cases: list[str], **params: Any) -> sweep_runner.SweepOptions:
    params.setdefault("launch_command", STANDIN)
    params.setdefault("strategy", "grid")  # every case launched (the module's default is adaptive)
    return sweep_runner.SweepOptions(
        matrix=node.matrix(cases),
        results_path=str(node.results_path(run_id)),
        run_id=run_id,
        port=node.port,
        simulated=True,
        env={key: node.env[key] for key in STANDIN_ENV},
        startup_timeout_s=30,
        stop_grace_s=5,
        release_timeout_s=10,
        **params,
    )


def run(opts: sweep_runner.SweepOptions) -> dict[str, Any]:
    return sweep_runner.run_sweep(opts, sweep_runner.make_plan(opts))


def port_taken(port: int) -> bool:
    return launcher.port_open("127.0.0.1", port)


# A sweep that is SIGKILLed the moment its first server has started, before anything
# after the start runs: the window in which an in-flight record written after the start
# would not exist yet.
KILLED_AFTER_START = textwrap.dedent(
    """
    import json, os, signal, sys
    from ansible_collections.bwtune.sglang.plugins.module_utils._server import launcher
    from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner

    start = launcher.start_server

    def start_then_die(*args, **kwargs):
        start(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    launcher.start_server = start_then_die
    opts = sweep_runner.SweepOptions(**json.loads(sys.argv[1]))
    sweep_runner.run_sweep(opts, sweep_runner.make_plan(opts))
    """
)


def test_a_server_started_just_before_the_sweep_was_killed_is_found_and_stopped(on_node: Node) -> None:
    node = on_node
    params = {
        "matrix": node.matrix(["ok-base"]),
        "results_path": str(node.results_path("orphan")),
        "run_id": "orphan",
        "port": node.port,
        "launch_command": STANDIN,
        "env": {key: node.env[key] for key in STANDIN_ENV},
    }
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_START, json.dumps(params)], env=node.env, timeout=120, check=False
    )
    assert killed.returncode == -signal.SIGKILL
    orphans = node.servers()
    assert orphans, "the killed sweep's server should be running"
    # A kill in the middle of an atomic write leaves its temporary file.
    stale = Path(f"{node.results_path('orphan')}.progress.json.tmp.4242")
    stale.write_text("{")

    outcome = run(options(node, "orphan", ["ok-base"]))

    stopped = outcome["summary"]["leftover_stopped"]
    assert stopped is not None and stopped["pid"] in orphans
    assert stopped["config_id"] == outcome["results"][0]["config_id"]
    assert not stale.exists()
    assert [line["status"] for line in read_lines(node.results_path("orphan"))] == ["ok"]
    node.assert_nothing_left()


def test_a_full_disk_mid_launch_names_the_file_and_still_stops_the_server(
    on_node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = on_node
    opts = options(node, "full", ["ok-base", "ok-slow"])
    progress_file = sweep_state.progress_path(opts.results_path)
    phase = sweep_state.Progress.phase
    seen: dict[str, Any] = {}

    def phase_then_fill_the_disk(self: sweep_state.Progress, config_id: str, name: str, *rest: int) -> None:
        phase(self, config_id, name, *rest)
        if name == "workload" and not seen:
            # From now on every write of the progress file hits a full device (ENOSPC).
            seen["server"] = json.loads(Path(f"{opts.results_path}.inflight.json").read_text())
            os.symlink("/dev/full", f"{progress_file}.tmp.{os.getpid()}")

    monkeypatch.setattr(sweep_state.Progress, "phase", phase_then_fill_the_disk)
    with pytest.raises(sweep_runner.SweepFailed) as failed:
        run(opts)

    message = str(failed.value)
    assert progress_file in message and os.strerror(errno.ENOSPC) in message, message
    assert not launcher.is_running(seen["server"]["pid"], seen["server"]["start_ticks"])
    assert not port_taken(seen["server"]["port"])
    os.unlink(f"{progress_file}.tmp.{os.getpid()}")
    node.assert_nothing_left()


def test_a_second_sweep_on_the_node_is_refused_naming_the_run_that_holds_it(on_node: Node) -> None:
    node = on_node
    first = options(node, "first", ["ok-base"])
    holder = {"run_id": "first", "pid": 4242, "results_path": first.results_path, "started_at": "then"}
    fd, _ = sweep_state.hold_node(first.node_lock_path, holder)
    assert fd is not None
    try:
        second = options(node, "second", ["ok-base"])
        assert second.node_lock_path == first.node_lock_path  # one lock per results root
        with pytest.raises(
            sweep_runner.SweepFailed,
            match=r"another sweep is running on this node: run first \(sweep pid 4242",
        ):
            run(second)
    finally:
        os.close(fd)
    assert not node.results_path("second").exists() and node.servers() == []


def test_a_launch_that_loses_its_port_is_started_again_on_another(
    on_node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = on_node
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    lost = taken.getsockname()[1]
    free_port = config_launch._free_port
    calls: list[int] = []

    def checked_free_then_taken(host: str, first: int) -> int:
        # The first check saw the port free; another process bound it before our server did.
        calls.append(first)
        return lost if len(calls) == 1 else free_port(host, first)

    monkeypatch.setattr(config_launch, "_free_port", checked_free_then_taken)
    try:
        outcome = run(options(node, "race", ["ok-base"]))
    finally:
        taken.close()
    assert len(calls) == 2
    lines = read_lines(node.results_path("race"))
    assert [line["status"] for line in lines] == ["ok"], lines
    assert outcome["summary"]["launches"] == 1
    node.assert_nothing_left()


def test_a_port_another_server_answers_on_is_never_measured_as_the_configs(
    on_node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another server took the chosen port and answers every request while ours still loads
    # (a real SGLang binds its port only after loading, minutes): its numbers must not become
    # this config's. The launch is started again on another port, and the line is our server's.
    node = on_node

    class Impostor(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    impostor = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Impostor)
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    taken = impostor.server_address[1]
    free_port = config_launch._free_port
    calls: list[int] = []

    def checked_free_then_taken(host: str, first: int) -> int:
        calls.append(first)
        return taken if len(calls) == 1 else free_port(host, first)

    monkeypatch.setattr(config_launch, "_free_port", checked_free_then_taken)
    try:
        outcome = run(options(node, "impostor", ["ok-base"]))
    finally:
        impostor.shutdown()
        impostor.server_close()
    assert len(calls) == 2
    (line,) = read_lines(node.results_path("impostor"))
    assert line["status"] == "ok", line
    assert line["metrics"], "measured on our own server, which answers generate requests"
    assert f"--port {taken}" not in " ".join(line["argv"])
    assert outcome["summary"]["launches"] == 1
    node.assert_nothing_left()


def test_a_server_that_refuses_the_key_is_auth_failed_not_wrong_output(on_node: Node) -> None:
    node = on_node
    opts = options(node, "auth", ["ok-base"], launch_command=[*STANDIN, "--api-key", "the-servers-own-key"])
    outcome = run(opts)
    (line,) = outcome["results"]
    assert line["status"] == results_contract.AUTH_FAILED, line["failure"]
    assert "HTTP 401" in line["failure"]["message"] and "sweep_api_key" in line["failure"]["message"]
    node.assert_nothing_left()


def test_the_nodes_logs_mask_the_key_and_every_secret_and_are_private(on_node: Node) -> None:
    # The stand-in prints its ServerArgs as SGLang does, api_key included (issue 21 #12).
    node = on_node
    key, token = "sk-sweep-key-0123456789", "hf_SweepTokenAbcdefghij"
    opts = options(node, "secrets", ["ok-base"], api_key=key, secret_env={"HF_TOKEN": token})
    outcome = run(opts)
    assert [line["status"] for line in outcome["results"]] == ["ok"]
    # Each line says what it was measured for: `bwtune import` ranks by it (issue 20 #28).
    objective = {"workload": "single", "metric": "output_tok_s_per_request", "goal": "max"}
    assert [line["objective"] for line in read_lines(node.results_path("secrets"))] == [objective]
    run_dir = node.results_path("secrets").parent
    (log,) = (run_dir / "logs").glob("*.log")
    text = log.read_text()
    assert "server_args=ServerArgs(model_path=" in text and "api_key='********'" in text
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert key.encode() not in data and token.encode() not in data, path
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    for folder in (run_dir, run_dir / "logs"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    node.assert_nothing_left()


@pytest.mark.parametrize(
    ("results_path", "why"),
    [
        ("/empty-dir-run/results.jsonl", "puts the run's folder in the filesystem root"),
        ("relative/run/results.jsonl", "must be an absolute or ~-relative path"),
        ("", "must be an absolute or ~-relative path"),
    ],
)
def test_a_results_path_in_the_root_or_relative_is_refused_before_anything_is_written(
    on_node: Node, results_path: str, why: str
) -> None:
    # sweep_results_dir: "" made /<run>/results.jsonl and /.bwtune-node.lock as root (issue 21 #13).
    with pytest.raises(sweep_runner.BadInput, match=r"^results_path: .*" + re.escape(why)):
        sweep_runner.SweepOptions(matrix=on_node.matrix(["ok-base"]), results_path=results_path, run_id="r1")
    assert not Path("/empty-dir-run").exists() and not Path("relative").exists()
