"""The sweep modules under real `ansible-playbook` (async job files, the async wrapper, job
events) for the fault campaign's cases that only show there (docs/reliability.md): a sweep
killed mid-benchmark, a resume whose node sweep fails at once, a secret in the environment.

The play is the sweep role's start-and-follow core, written here so that these cases do not
depend on the role's variables."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._server import launcher
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_state

from .conftest import ANSIBLE_PLAYBOOK, Node, read_lines

PLAY = [
    {
        "name": "Start and follow a sweep",
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Start the sweep",
                "bwtune.sglang.sweep": {
                    "matrix": "{{ test_matrix }}",
                    "results_path": "{{ test_results }}",
                    "run_id": "{{ test_run_id }}",
                    "port": "{{ test_port }}",
                    "launch_command": "{{ test_launch_command }}",
                    "env": "{{ test_env }}",
                    "secret_env": "{{ test_secret_env | default({}) }}",
                    "simulated": True,
                },
                "async": 600,
                "poll": 0,
                "register": "job",
            },
            {
                "name": "Follow the sweep",
                "bwtune.sglang.sweep_progress": {
                    "results_path": "{{ test_results }}",
                    "job_id": "{{ job.ansible_job_id }}",
                    "async_dir": "{{ job.results_file | dirname }}",
                },
                "register": "follow",
                "until": "follow.finished",
                "retries": 300,
                "delay": 1,
            },
            {
                "name": "Fail when the sweep did not finish",
                "ansible.builtin.fail": {"msg": "{{ follow.result.error }}"},
                "when": "follow.result.error | default(none) is not none",
            },
        ],
    }
]
STANDIN_ENV = ("BWTUNE_STANDIN_PROFILE", "BWTUNE_STANDIN_STARTUP_SCALE", "BWTUNE_STANDIN_STATE_DIR")


def play_argv(node: Node, run_id: str, matrix: dict[str, Any], **extravars: Any) -> list[str]:
    playbook = node.root / "play.yml"
    playbook.write_text(yaml.safe_dump(PLAY, sort_keys=False))
    variables = {
        "ansible_python_interpreter": sys.executable,
        "test_matrix": matrix,
        "test_results": str(node.results_path(run_id)),
        "test_run_id": run_id,
        "test_port": node.port,
        "test_launch_command": [sys.executable, "-m", "bwtune.standin"],
        "test_env": {key: node.env[key] for key in STANDIN_ENV},
        **extravars,
    }
    return [
        str(ANSIBLE_PLAYBOOK),
        str(playbook),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        json.dumps(variables),
    ]


def play(
    node: Node, run_id: str, matrix: dict[str, Any], **extravars: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        play_argv(node, run_id, matrix, **extravars),
        capture_output=True,
        text=True,
        env=node.env,
        cwd=node.root,
        timeout=180,
        check=False,
    )


def followed(node: Node) -> dict[str, Any]:
    """What the last "Follow the sweep" returned."""
    follow = [e for e in node.task_results("Follow the sweep") if e["event"] in ("ok", "failed")]
    assert follow, "the play never followed the sweep"
    return dict(follow[-1]["result"])


def _wait_for_the_async_wrapper_to_clean_up(node: Node, timeout: float = 60) -> None:
    remote_tmp = node.root / "ansible" / "remote-tmp"
    deadline = time.monotonic() + timeout
    while list(remote_tmp.glob("ansible-tmp-*")):
        assert time.monotonic() < deadline, "the async job's module folder was never removed"
        time.sleep(0.05)


def test_a_killed_node_sweep_is_reported_as_such_with_what_it_finished_and_its_server_stopped(
    node: Node,
) -> None:
    matrix = node.matrix(["ok-base", "ok-slow", "ok-fastest"])
    matrix["workloads"][0].update(output_len=48, num_prompts=4)  # seconds in its workload
    results = node.results_path("killed")
    proc = subprocess.Popen(
        play_argv(node, "killed", matrix),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=node.env,
        cwd=node.root,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            state = sweep_state.read_progress(str(results)) or {}
            current = state.get("current") or {}
            if state.get("done") and current.get("phase") == "workload":
                break
            time.sleep(0.05)
        else:
            raise AssertionError("never saw a measured config and a server in its workload")
        os.kill(state["pid"], signal.SIGKILL)  # only the node's sweep; the play goes on
        # What the dead sweep left: its final in-flight record (written before each start).
        server = json.loads(Path(f"{results}.inflight.json").read_text())
        assert server["config_id"] not in {line["config_id"] for line in read_lines(results)}
        stdout, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert proc.returncode != 0
    assert "No start of json char found" not in stdout and "Traceback" not in stdout, stdout[-3000:]
    result = followed(node)["result"]
    assert "ended before it finished" in result["error"] and str(results) in result["error"], result
    finished = [line for line in read_lines(results) if line["status"] == "ok"]
    assert len(finished) == 1 and result["results"] == finished
    stopped = result["leftover_stopped"]
    assert stopped["config_id"] == server["config_id"] and stopped["port"] == server["port"]
    # Stopped by the follow-up, not left for a resume.
    assert not launcher.is_running(stopped["pid"], launcher.start_ticks_of(stopped["pid"]))
    assert not launcher.port_open("127.0.0.1", server["port"])
    node.assert_nothing_left()


def test_a_resume_whose_node_sweep_fails_at_once_fails_and_no_secret_is_written_anywhere(node: Node) -> None:
    token = "hf_" + secrets.token_hex(16)
    matrix = node.matrix(["ok-base"])
    first = play(node, "resumed", matrix, test_secret_env={"HF_TOKEN": token})
    assert first.returncode == 0, first.stdout[-3000:]
    assert followed(node)["result"]["summary"]["by_status"] == {"ok": 1}

    # While the async job runs, its module (arguments included) waits in a 0700 temp folder,
    # as every Ansible module does; the async wrapper removes it when the job ends.
    _wait_for_the_async_wrapper_to_clean_up(node)
    # Every artifact of the run: the node's results folder, the async job files, Ansible's
    # temp folders, the job events, the play's own output.
    artifacts = [
        p for p in node.root.rglob("*") if p.is_file() and "model" not in p.relative_to(node.root).parts
    ]
    assert any("async" in p.parts for p in artifacts) and node.events_path in artifacts
    leaks = [str(p) for p in artifacts if token.encode() in p.read_bytes()]
    assert leaks == [] and token not in first.stdout + first.stderr

    # The same run again while its results file is held (a sweep of it still runs): the
    # node's sweep fails at once, and the play must say so, not show the first run's success.
    fd = os.open(f"{node.results_path('resumed')}.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        again = play(node, "resumed", matrix)
    finally:
        os.close(fd)
    assert again.returncode != 0, again.stdout[-3000:]
    error = followed(node)["result"]["error"]
    assert "run resumed is still running on this node" in error, error
    assert "summary" not in followed(node)["result"]
    node.assert_nothing_left()
