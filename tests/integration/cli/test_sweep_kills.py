"""Kills around `bwtune sweep` (issue 10, cases 2 and 3), end to end on the stand-in.

- The CLI SIGKILLed: its ansible-playbook (and the workers, each in a session of their own)
  end with it; the node's detached sweep goes on; a resume says the run still runs and how
  to follow or stop it; `bwtune sweep --attach` follows it and keeps its results.
- Only the node's sweep SIGKILLed mid-benchmark: one line, not the async wrapper's
  traceback, and `--json` holds the config that had finished.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import STANDIN, bwtune_argv, run, sweep_argv, tiny_matrix

pytestmark = pytest.mark.slow  # each runs real sweeps: tens of seconds

GONE_WITHIN_S = 60  # how long a killed process tree may take to go: a deadline, not a measure


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of a live process; None once it is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    state = fields[0].decode()
    return None if state in ("Z", "X") else (state, int(fields[1]), int(fields[19]))


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))):
            found.setdefault(stat[1], []).append(int(entry.name))
    return found


def _tree(root: int) -> Iterator[int]:
    children = _children()
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        yield pid
        stack.extend(children.get(pid, []))


def _alive(pids: dict[int, int]) -> list[int]:
    """Those of pid -> start time still running (a reused pid is another process)."""
    return [pid for pid, start in pids.items() if (stat := _stat(pid)) and stat[2] == start]


def _wait_for(proc: subprocess.Popen[str], words: str) -> str:
    """Read the sweep's progress lines until one holds `words`; return the run id."""
    assert proc.stderr is not None
    run_id = ""
    for line in proc.stderr:
        if line.startswith("bwtune: sweeping run "):
            run_id = line.split()[3]
        if words in line:
            return run_id
    raise AssertionError(f"the sweep never reported {words!r} (exit {proc.wait()})")


def _node_sweep_pid(node: Path, run_id: str) -> int:
    progress = json.loads((node / run_id / "results.jsonl.progress.json").read_text())
    return int(progress["pid"])


def test_a_killed_cli_takes_its_playbook_along_and_attach_follows_the_run_to_its_results(
    sweep_env: dict[str, str], bwtune_home: Path, tmp_path: Path
) -> None:
    matrix = tiny_matrix(tmp_path, ["flashinfer_cutlass"])
    node = tmp_path / "node"
    proc = subprocess.Popen(
        sweep_argv(STANDIN, matrix, node),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=sweep_env,
    )
    run_id = _wait_for(proc, " starting")
    node_sweep = _node_sweep_pid(node, run_id)
    # Freeze the node's sweep so it is surely still running while the resume asks
    # (its lock and its process stay; only time stands still for it).
    os.kill(node_sweep, signal.SIGSTOP)
    try:
        playbook = {pid: stat[2] for pid in _tree(proc.pid) if (stat := _stat(pid))}
        assert any(b"ansible-playbook" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in playbook)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + GONE_WITHIN_S
        while _alive(playbook) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(playbook), "ansible-playbook or its workers outlived the killed bwtune"
        assert _stat(node_sweep), "the node's detached sweep must outlive bwtune: that is its design"

        resumed = run(bwtune_argv("sweep", "--resume", run_id, "--json"), sweep_env)
        assert resumed.returncode == 1, resumed.stderr
        still = [line for line in resumed.stderr.splitlines() if line.startswith("bwtune: ")][-1]
        assert still == (
            f"bwtune: run {run_id} is still running on localhost (0/1 done): follow it with "
            f"`bwtune sweep --attach {run_id}`, or stop it with `bwtune cancel {run_id}`"
        ), resumed.stderr
        assert "own results folder" not in resumed.stderr and "Traceback" not in resumed.stderr
    finally:
        os.kill(node_sweep, signal.SIGCONT)

    attached = run(bwtune_argv("sweep", "--attach", run_id, "--json"), sweep_env)
    assert attached.returncode == 0, attached.stderr
    output = json.loads(attached.stdout)
    assert output["run_id"] == run_id
    assert [r["status"] for r in output["results"]] == ["ok"]
    assert (bwtune_home / "runs" / run_id / "report.html").is_file()


def test_a_killed_node_sweep_is_one_line_and_json_keeps_what_finished(
    sweep_env: dict[str, str], bwtune_home: Path, tmp_path: Path
) -> None:
    matrix = tiny_matrix(tmp_path, ["flashinfer_cutlass", "marlin"], num_prompts=4)
    node = tmp_path / "node"
    proc = subprocess.Popen(
        [*sweep_argv(STANDIN, matrix, node), "--json"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=sweep_env,
    )
    run_id = _wait_for(proc, "1/2 done")  # the first config is recorded
    progress = node / run_id / "results.jsonl.progress.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # the second config's benchmark: read straight from the node
        try:
            state = json.loads(progress.read_text())
        except ValueError:  # caught between two writes
            state = {}
        if state.get("done") == 1 and (state.get("current") or {}).get("phase") == "workload":
            break
        time.sleep(0.1)
    else:
        pytest.fail("the second config never reached its benchmark")
    os.kill(int(state["pid"]), signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    problems = [line for line in err.splitlines() if line.startswith("bwtune: host localhost")]
    assert len(problems) == 1 and "ended before it finished" in problems[0], err
    assert "No start of json char found" not in err and "Traceback" not in err
    output = json.loads(out)
    assert [r["status"] for r in output["results"]] == ["ok"]
