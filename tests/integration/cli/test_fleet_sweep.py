"""A fleet sweep end to end (issue 25, docs/fleet.md): `bwtune sweep --strategy grid` on two
local stand-in hosts (distinct node folders and ports) shares the plan's launches between
them, each launched exactly once across the hosts; a host whose node sweep is SIGKILLed
mid-sweep has its unfinished launches reassigned to the other host in a further round."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import MODEL, REPO, bwtune_argv, run

HOSTS = ("node-a", "node-b")


def fleet_inventory(tmp_path: Path, hosts: tuple[str, ...] = HOSTS) -> Path:
    """Local stand-in hosts, each with its own results folder (so its own node lock) and ports."""
    inventory = {
        "all": {
            "hosts": {
                host: {"sweep_results_dir": str(tmp_path / "nodes" / host), "sweep_port": 31000 + 1000 * n}
                for n, host in enumerate(hosts)
            },
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                "bwtune_simulated": True,
                "sweep_launch_command": ["{{ ansible_playbook_python }}", "-m", "bwtune.standin"],
            },
        }
    }
    path = tmp_path / "fleet.yml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def fleet_matrix(tmp_path: Path) -> Path:
    """The demo matrix cut to 4 launches (2 x 2), one pruned and one duplicate config, one
    short workload."""
    model = tmp_path / "model"
    shutil.copytree(MODEL, model)
    matrix: dict[str, Any] = yaml.safe_load((REPO / "examples" / "demo.yml").read_text())
    matrix["model"]["path"] = str(model)
    matrix["axes"] = {
        "moe-runner-backend": ["flashinfer_cutlass", "marlin", "flashinfer_trtllm", "auto"],
        "fp4-gemm-backend": ["flashinfer_cutlass", "flashinfer_cudnn"],
    }
    matrix.pop("bundles", None)
    matrix.pop("exclude", None)
    matrix["workloads"] = [matrix["workloads"][0]]
    path = tmp_path / "fleet-matrix.yml"
    path.write_text(yaml.safe_dump(matrix, sort_keys=False))
    return path


def node_lines(tmp_path: Path, run_id: str) -> dict[str, list[dict[str, Any]]]:
    found = {}
    for host in HOSTS:
        path = tmp_path / "nodes" / host / run_id / "results.jsonl"
        found[host] = (
            [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()] if path.exists() else []
        )
    return found


def launched(lines: list[dict[str, Any]]) -> list[str]:
    return [line["config_id"] for line in lines if line["status"] not in ("pruned", "duplicate")]


def stored(bwtune_home: Path, run_id: str) -> list[tuple[str, str, str]]:
    with sqlite3.connect(bwtune_home / "results.db") as conn:
        return conn.execute(
            "SELECT host, config_id, status FROM results WHERE run_id = ? ORDER BY config_id", (run_id,)
        ).fetchall()


def sweep(tmp_path: Path, env: dict[str, str], *extra: str) -> Any:
    argv = bwtune_argv("sweep", "-i", str(fleet_inventory(tmp_path)), "--strategy", "grid", "--json", *extra)
    return run(argv, env, timeout=600)


def test_two_hosts_share_the_grid_each_config_launched_once(
    sweep_env: dict[str, str], bwtune_home: Path, tmp_path: Path
) -> None:
    done = sweep(tmp_path, sweep_env, "-m", str(fleet_matrix(tmp_path)))
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    run_id = output["run_id"]
    state = json.loads((bwtune_home / "runs" / run_id / "fleet.json").read_text())
    (group,) = state["groups"]
    assert group["hosts"] == list(HOSTS) and len(group["launches"]) == 4
    shares = group["by_host"]
    assert sorted(shares["node-a"] + shares["node-b"]) == sorted(group["launches"])  # disjoint, complete
    assert shares["node-a"] and shares["node-b"]
    lines = node_lines(tmp_path, run_id)
    # Count the nodes' own lines: every launch of the plan exactly once across the hosts, each
    # on the host its share names.
    every = Counter(launched(lines["node-a"]) + launched(lines["node-b"]))
    assert sorted(every) == sorted(group["launches"]) and set(every.values()) == {1}
    for host in HOSTS:
        assert sorted(launched(lines[host])) == sorted(shares[host])
        # Both hosts planned the whole matrix: the same pruned and duplicate lines.
        assert sorted(c for c in (line["config_id"] for line in lines[host]) if c not in every) == sorted(
            c for c in (line["config_id"] for line in lines["node-a"]) if c not in every
        )
    # The database and the output count each config once (one host's pruned lines kept).
    rows = stored(bwtune_home, run_id)
    assert Counter(config for _host, config, _status in rows).most_common(1)[0][1] == 1
    unlaunched = len(lines["node-a"]) - len(launched(lines["node-a"]))
    assert unlaunched == 4 and len(rows) == unlaunched + len(group["launches"])  # each config once
    assert Counter(r["id"] for r in output["results"]).most_common(1)[0][1] == 1
    assert output["not_reached"] == [] and output["left_out"] == []
    rows_by_host = {r["host"]: r for r in output["fleet"]["hosts"]}
    assert {h: (r["done"], r["queued"], r["lost"]) for h, r in rows_by_host.items()} == {
        h: (len(shares[h]), 0, False) for h in HOSTS
    }
    assert output["fleet"]["reassigned"] == []


def kill_after_first_launch(folder: Path, stop: threading.Event, killed: dict[str, Any]) -> None:
    """SIGKILL the node sweep under `folder` once it has finished a launch (it has two)."""
    while not stop.is_set():
        for path in folder.glob("*/results.jsonl.progress.json"):
            try:
                progress = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if progress.get("done", 0) >= 1 and not progress.get("finished") and progress.get("pid"):
                os.kill(int(progress["pid"]), signal.SIGKILL)
                killed["pid"] = progress["pid"]
                return
        time.sleep(0.1)


@pytest.mark.quiet
def test_a_host_killed_mid_sweep_has_its_unfinished_launches_reassigned(
    sweep_env: dict[str, str], bwtune_home: Path, tmp_path: Path
) -> None:
    # Slower starts so the kill lands while node-b's second launch runs.
    profile = Path(sweep_env["BWTUNE_STANDIN_PROFILE"])
    slower = yaml.safe_load(profile.read_text())
    slower["startup"]["weight_load_s"] = 4
    profile.write_text(yaml.safe_dump(slower))
    stop, killed = threading.Event(), {}
    watcher = threading.Thread(
        target=kill_after_first_launch, args=(tmp_path / "nodes" / "node-b", stop, killed), daemon=True
    )
    watcher.start()
    try:
        done = sweep(tmp_path, sweep_env, "-m", str(fleet_matrix(tmp_path)))
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert killed, done.stderr
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    run_id = output["run_id"]
    state = json.loads((bwtune_home / "runs" / run_id / "fleet.json").read_text())
    (group,) = state["groups"]
    assert group["lost"] == ["node-b"] and state["rounds"] == 2
    (entry,) = state["reassigned"]
    assert entry["host"] == "node-b" and list(entry["to"]) == ["node-a"]
    assert "reassigned: host node-b is lost after round 1" in done.stderr
    lines = node_lines(tmp_path, run_id)
    b_done = launched(lines["node-b"])
    assert len(b_done) == 1  # its finished launch never moves
    assert group["by_host"]["node-b"] == b_done
    # Nothing measured twice across the hosts, nothing lost.
    every = Counter(launched(lines["node-a"]) + b_done)
    assert sorted(every) == sorted(group["launches"]) and set(every.values()) == {1}
    moved = entry["to"]["node-a"]
    assert moved and not set(moved) & set(b_done) and set(moved) <= set(launched(lines["node-a"]))
    rows = stored(bwtune_home, run_id)
    assert Counter(config for _host, config, _status in rows).most_common(1)[0][1] == 1
    assert {config for host, config, _s in rows if host == "node-b" and config in every} == set(b_done)
    assert output["not_reached"] == []  # node-b's unreached launch was measured by node-a
    rows_by_host = {r["host"]: r for r in output["fleet"]["hosts"]}
    assert rows_by_host["node-b"]["lost"] and rows_by_host["node-b"]["queued"] == 0
    assert rows_by_host["node-a"]["queued"] == 0


def wait_finished(tmp_path: Path, run_id: str, timeout: float = 300) -> None:
    """Until every host's detached node sweep of the run has ended (its progress file says so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = [tmp_path / "nodes" / host / run_id / "results.jsonl.progress.json" for host in HOSTS]
        try:
            if all(json.loads(path.read_text()).get("finished") for path in files):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"the node sweeps of {run_id} did not end")


@pytest.mark.quiet
def test_a_resume_after_the_controller_is_sigkilled_recomputes_the_same_shares(
    sweep_env: dict[str, str], bwtune_home: Path, tmp_path: Path
) -> None:
    argv = bwtune_argv(
        "sweep", "-i", str(fleet_inventory(tmp_path)), "--strategy", "grid", "-m", str(fleet_matrix(tmp_path))
    )
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sweep_env)
    assert proc.stderr is not None
    run_id = None
    for text in proc.stderr:
        if text.startswith("bwtune: sweeping run "):
            run_id = text.split()[3].rstrip(",")
        if re.search(r"  1/2 done", text):  # a launch finished on a host: mid-sweep
            break
    else:
        raise AssertionError(f"the fleet sweep never reported progress (exit {proc.wait()})")
    proc.kill()  # SIGKILL: no cleanup, no import; the node sweeps go on detached
    proc.wait(timeout=30)
    assert run_id
    wait_finished(tmp_path, run_id)
    state_file = bwtune_home / "runs" / run_id / "fleet.json"
    first = json.loads(state_file.read_text())
    state_file.unlink()  # killed before the state was kept: the resume computes it again
    done = run(bwtune_argv("sweep", "--resume", run_id, "--json"), sweep_env, timeout=600)
    assert done.returncode == 0, done.stderr
    again = json.loads(state_file.read_text())
    assert [g["by_host"] for g in again["groups"]] == [g["by_host"] for g in first["groups"]]
    lines = node_lines(tmp_path, run_id)
    every = Counter(launched(lines["node-a"]) + launched(lines["node-b"]))
    (group,) = again["groups"]
    assert sorted(every) == sorted(group["launches"]) and set(every.values()) == {1}  # nothing twice
    output = json.loads(done.stdout)
    assert set(Counter(r["id"] for r in output["results"]).values()) == {1}
    assert {r["id"] for r in output["results"]} >= set(group["launches"])
