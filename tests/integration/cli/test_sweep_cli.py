"""`bwtune sweep` end to end on this machine: the real sweep playbook, module and stand-in."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import INVENTORIES, STANDIN, bwtune_argv, run, sweep_argv, tiny_matrix


def test_sweep_json_imports_results_and_writes_reports(
    sweep_env: dict[str, str], bwtune_home: Path, tmp_path: Path
) -> None:
    matrix = tiny_matrix(tmp_path, ["flashinfer_cutlass", "flashinfer_trtllm"])
    done = run(sweep_argv(STANDIN, matrix, tmp_path / "node", "--json"), sweep_env)
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert set(output) >= {"run_id", "results", "best", "summary"}
    statuses = sorted((r["status"], r["host"]) for r in output["results"])
    # trtllm-gen MoE does not run on SM120: the planner prunes it and nothing is launched.
    assert ("ok", "localhost") in statuses
    assert all(status in ("ok", "pruned") for status, _ in statuses)
    ok = next(r for r in output["results"] if r["status"] == "ok")
    assert set(ok) >= {"id", "host", "status", "flags", "failure", "metrics"}
    assert ok["simulated"] is True and output["summary"]["simulated"] is True
    assert output["best"]["id"] == ok["id"]
    with sqlite3.connect(bwtune_home / "results.db") as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM results WHERE run_id = ?", (output["run_id"],)
        ).fetchone()
    assert count == len(statuses)
    run_dir = bwtune_home / "runs" / output["run_id"]
    assert json.loads((run_dir / "matrix.json").read_text())["axes"] == {
        "moe-runner-backend": ["flashinfer_cutlass", "flashinfer_trtllm"]
    }


# The Ctrl-C must land while a launch runs: on a machine loaded many times over, the
# progress line can come after the sweep is past the point the test means.
@pytest.mark.quiet
def test_ctrl_c_cancels_the_sweep_and_resume_finishes_it(
    sweep_env: dict[str, str], bwtune_home: Path, tmp_path: Path
) -> None:
    matrix = tiny_matrix(tmp_path, ["flashinfer_cutlass", "marlin", "triton"], num_prompts=6)
    # Each launch loads its weights for 8 s, so once the first config is done the other two
    # still take 16 s or more: the Ctrl-C below comes mid-sweep however late a loaded machine
    # shows the progress (at 1 s it could come after the last config).
    profile = Path(sweep_env["BWTUNE_STANDIN_PROFILE"])
    slower = yaml.safe_load(profile.read_text())
    slower["startup"]["weight_load_s"] = 8
    profile.write_text(yaml.safe_dump(slower))
    node = tmp_path / "node"
    proc = subprocess.Popen(
        sweep_argv(STANDIN, matrix, node),
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=sweep_env,
    )
    assert proc.stderr is not None
    run_id = None
    for line in proc.stderr:
        if line.startswith("bwtune: sweeping run "):
            run_id = line.split()[3]
        if re.search(r"  [1-9]\d*/\d+ done", line) and "finished" not in line:  # mid-sweep
            break
    else:
        raise AssertionError(f"the sweep never reported progress (exit {proc.wait()})")
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err
    assert f"cancelled run {run_id}; stopped on: localhost" in err
    assert f"bwtune: resume with: bwtune sweep --resume {run_id}" in err.splitlines()
    results_file = node / str(run_id) / "results.jsonl"
    before = [json.loads(line) for line in results_file.read_text().splitlines() if line.strip()]
    assert 1 <= len(before) < 3
    assert not _servers_of(tmp_path / "model"), "the node's server outlived the cancel"

    # The command printed, as it is: the run's own inventory and node folder come with it.
    done = run(bwtune_argv("sweep", "--resume", str(run_id), "--json"), sweep_env)
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert output["run_id"] == run_id
    after = [json.loads(line) for line in results_file.read_text().splitlines() if line.strip()]
    assert len(after) == 3  # every config of the matrix has its line on the node
    launched = [r for r in after if r["status"] not in ("pruned", "duplicate")]
    assert len(output["results"]) >= len(launched) >= 2
    # Configs measured before the interrupt were kept, not measured again.
    assert [r["started_at"] for r in after[: len(before)]] == [r["started_at"] for r in before]


def test_an_unreachable_host_exits_1_naming_it(cli_env: dict[str, str], tmp_path: Path) -> None:
    matrix = tiny_matrix(tmp_path, ["flashinfer_cutlass"])
    done = run(sweep_argv(INVENTORIES / "unreachable.yml", matrix, tmp_path / "node"), cli_env, timeout=120)
    assert done.returncode == 1
    assert "bwtune: host ghost is unreachable" in done.stderr


def _servers_of(model: Path) -> list[int]:
    """Processes serving `model` (the stand-in's argv holds --model-path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(model).encode() in cmdline.split(b"\0"):
                found.append(int(entry.name))
    return found


def test_two_hosts_sweep_into_one_run_and_the_database_merges_them(
    sweep_env: dict[str, str], bwtune_home: Path, tmp_path: Path
) -> None:
    # Two inventory hosts on this machine: each its own port and results folder, as two
    # nodes of a fleet would have; the controller merges both into one run.
    inventory = tmp_path / "two_nodes.yml"
    node = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "bwtune_simulated": True,
        "sweep_launch_command": ["{{ ansible_playbook_python }}", "-m", "bwtune.standin"],
    }
    hosts = {
        name: {**node, "sweep_port": port, "sweep_results_dir": str(tmp_path / name)}
        for name, port in (("node-a", 31500), ("node-b", 31700))
    }
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    matrix = tiny_matrix(tmp_path, ["flashinfer_cutlass", "marlin"])

    argv = bwtune_argv("sweep", "-i", str(inventory), "-m", str(matrix), "--json")
    done = run(argv, sweep_env, timeout=600)
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    by_host: dict[str, set[str]] = {}
    for result in output["results"]:
        by_host.setdefault(result["host"], set()).add(result["status"])
    assert by_host == {"node-a": {"ok"}, "node-b": {"ok"}}
    assert len(output["results"]) == 4
    for name in hosts:  # each node wrote its own results file
        lines = (tmp_path / name / output["run_id"] / "results.jsonl").read_text().splitlines()
        assert {json.loads(line)["host"] for line in lines} == {name}

    # Importing a node's file again changes nothing in the merged run.
    before = run(bwtune_argv("export", output["run_id"], "--format", "json"), sweep_env).stdout
    node_a_file = tmp_path / "node-a" / output["run_id"] / "results.jsonl"
    again = run(bwtune_argv("import", str(node_a_file), "--run-id", output["run_id"]), sweep_env)
    assert again.returncode == 0, again.stderr
    after = run(bwtune_argv("export", output["run_id"], "--format", "json"), sweep_env).stdout
    assert json.loads(after) == json.loads(before)
