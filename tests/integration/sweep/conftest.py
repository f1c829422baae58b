"""A private node for each playbook-level sweep test: `ansible-playbook playbooks/sweep.yml`
on localhost against the stand-in, with its own model copy, stand-in state, results folder,
Ansible temp and async folders, and a recorder of what each task returned."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).parent
REPO = HERE.parents[2]
PLAYBOOK = REPO / "playbooks" / "sweep.yml"
INVENTORY = REPO / "inventory" / "local.yml"
MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
MATRIX = HERE / "matrix.yml"
PROFILE = HERE / "profile.yml"
FAKE_SMI_DIR = REPO / "src" / "bwtune" / "standin" / "bin"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

# A stand-in writes its configuration into its log; the port is how a test finds its sockets.
_LOG_PORT = re.compile(r"server_args=ServerArgs\(.*\bport=(\d+)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Node:
    """localhost as a sweep node, private to one test."""

    root: Path
    model: Path
    env: dict[str, str]
    port: int

    @property
    def results_dir(self) -> Path:
        return self.root / "node"

    @property
    def state_dir(self) -> Path:
        return Path(self.env["BWTUNE_STANDIN_STATE_DIR"])

    @property
    def events_path(self) -> Path:
        return Path(self.env["BWTUNE_TEST_EVENTS"])

    def results_path(self, run_id: str) -> Path:
        return self.results_dir / run_id / "results.jsonl"

    def matrix(self, cases: list[str] | None = None, **changes: Any) -> dict[str, Any]:
        """The test matrix on this node's model copy, cut to `cases` (rows of the `case` axis)."""
        matrix: dict[str, Any] = yaml.safe_load(MATRIX.read_text())
        matrix["model"]["path"] = str(self.model)
        if cases is not None:
            matrix["axes"]["case"] = cases
        matrix.update(changes)
        return matrix

    def write_matrix(self, matrix: dict[str, Any] | str, name: str = "matrix.yml") -> Path:
        path = self.root / name
        path.write_text(matrix if isinstance(matrix, str) else yaml.safe_dump(matrix, sort_keys=False))
        return path

    def argv(self, matrix_file: Path, run_id: str, *extra: str, **extravars: Any) -> list[str]:
        variables = {
            "sweep_matrix_file": str(matrix_file),
            "sweep_results_dir": str(self.results_dir),
            "bwtune_run_id": run_id,
            "sweep_port": self.port,
            "sweep_poll_s": 1,
            **extravars,
        }
        return [
            str(ANSIBLE_PLAYBOOK),
            str(PLAYBOOK),
            "-i",
            str(INVENTORY),
            "-e",
            json.dumps(variables),
            *extra,
        ]

    def play(
        self, matrix_file: Path, run_id: str, *extra: str, timeout: float = 180, **extravars: Any
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(matrix_file, run_id, *extra, **extravars),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
            cwd=self.root,
        )

    def events(self) -> list[dict[str, Any]]:
        return read_lines(self.events_path)

    def task_results(self, task: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("task") == task]

    def facts(self) -> dict[str, Any]:
        """The node facts the playbook gathered and handed to the sweep (which plans with them)."""
        facts: dict[str, Any] = {}
        for event in self.events():
            gathered = event.get("result", {}).get("ansible_facts", {})
            for key in ("gpu", "stack", "checkpoint"):
                if "bwtune_" + key in gathered:
                    facts[key] = gathered["bwtune_" + key]
        assert "gpu" in facts, "the playbook gathered no GPU facts"
        return facts

    def custom_stats(self) -> dict[str, Any]:
        stats = [e for e in self.events() if e["event"] == "stats"]
        assert len(stats) == 1, f"expected one stats event, got {len(stats)}"
        return dict(stats[0]["custom"].get("_run", {}))

    # -- what must be gone after a sweep

    def servers(self) -> list[int]:
        """Live processes serving this node's model copy (the stand-in's argv names it)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if str(self.model).encode() in argv and state not in ("Z", "X"):
                found.append(int(entry.name))
        return found

    def server_ports(self) -> dict[str, int]:
        """The port each stand-in of this node listened on (server log name -> port)."""
        ports = {}
        for log in self.results_dir.glob("*/logs/*.log"):
            found = _LOG_PORT.findall(log.read_text(errors="replace"))
            if found:
                ports[log.name] = int(found[-1])
        return ports

    def open_ports(self) -> list[int]:
        open_ = []
        for port in sorted(set(self.server_ports().values())):
            with socket.socket() as probe:
                probe.settimeout(0.5)
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    open_.append(port)
        return open_

    def gpu_apps(self) -> str:
        """The fake nvidia-smi's compute apps for this node's stand-in state ('' when none)."""
        done = subprocess.run(
            [
                str(FAKE_SMI_DIR / "nvidia-smi"),
                "--query-compute-apps=pid,used_memory",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=30,
            check=True,
        )
        return done.stdout.strip()

    def assert_nothing_left(self) -> None:
        assert self.servers() == [], "a stand-in outlived the sweep"
        assert self.open_ports() == [], "a stand-in's port is still open"
        assert self.gpu_apps() == "", "simulated GPU memory is still held"
        live_records = [
            p for p in self.state_dir.glob("*.json") if p.stem.isdigit() and Path(f"/proc/{p.stem}").exists()
        ]
        assert live_records == []
        assert not list(self.results_dir.glob("*/results.jsonl.inflight.json")), "a server is still in flight"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    model = tmp_path / "model"  # a private copy: this test's servers are told apart by their argv
    shutil.copytree(MODEL, model)
    ansible = tmp_path / "ansible"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "BWTUNE_"))}
    env.update(
        PATH=os.pathsep.join([str(FAKE_SMI_DIR), str(ANSIBLE_PLAYBOOK.parent), env.get("PATH", "")]),
        BWTUNE_STANDIN_PROFILE=str(PROFILE),
        BWTUNE_STANDIN_STARTUP_SCALE="0.01",
        BWTUNE_STANDIN_STATE_DIR=str(tmp_path / "standin-state"),
        BWTUNE_TEST_EVENTS=str(tmp_path / "events.jsonl"),
        ANSIBLE_HOME=str(ansible / "home"),
        ANSIBLE_LOCAL_TEMP=str(ansible / "local-tmp"),
        ANSIBLE_REMOTE_TEMP=str(ansible / "remote-tmp"),
        ANSIBLE_ASYNC_DIR=str(ansible / "async"),
        ANSIBLE_CALLBACK_PLUGINS=str(HERE / "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="bwtune_record",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="False",
    )
    the_node = Node(root=tmp_path, model=model, env=env, port=_free_port())
    yield the_node
    # A failed test must not leave its servers to the next one (they are ours: our model copy).
    for pid in the_node.servers():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
