"""`bwtune sweep --resume` end to end (issues 20 #24, 21 #4): a run interrupted and resumed
keeps every row of its plan (pruned and duplicate ones included), and a resume under an
inventory that names the node otherwise is refused before anything is launched."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
from pathlib import Path

import yaml

from .conftest import STANDIN, bwtune_argv, run, sweep_argv, tiny_matrix


def test_an_interrupted_run_resumed_keeps_every_row_and_another_host_name_is_refused(
    sweep_env: dict[str, str], bwtune_home: Path, tmp_path: Path
) -> None:
    # trtllm MoE kernels do not run on SM120 (pruned); auto resolves to flashinfer_cutlass
    # there (a duplicate of it): five configs, at most three launches.
    matrix = tiny_matrix(
        tmp_path, ["flashinfer_cutlass", "marlin", "triton", "flashinfer_trtllm", "auto"], num_prompts=6
    )
    node = tmp_path / "node"
    proc = subprocess.Popen(
        sweep_argv(STANDIN, matrix, node, "--strategy", "grid"),
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

    done = run(bwtune_argv("sweep", "--resume", str(run_id), "--json"), sweep_env)
    assert done.returncode == 0, done.stderr
    statuses = sorted(result["status"] for result in json.loads(done.stdout)["results"])
    assert len(statuses) == 5, f"every config of the plan keeps its row: {statuses}"
    assert {"pruned", "duplicate", "ok"} <= set(statuses)

    # The same node under another inventory name: refused, nothing launched, nothing stored.
    renamed = yaml.safe_load(STANDIN.read_text())
    renamed["all"]["hosts"] = {"gpu-renamed": renamed["all"]["hosts"]["localhost"]}
    inventory = tmp_path / "renamed.yml"
    inventory.write_text(yaml.safe_dump(renamed))
    lines_before = (node / str(run_id) / "results.jsonl").read_text()
    again = run(bwtune_argv("sweep", "--resume", str(run_id), "-i", str(inventory), "--json"), sweep_env)
    assert again.returncode == 1, again.stderr
    assert "as host 'localhost'" in again.stderr and "calls it 'gpu-renamed'" in again.stderr
    assert (node / str(run_id) / "results.jsonl").read_text() == lines_before
    with sqlite3.connect(bwtune_home / "results.db") as conn:
        hosts = {row[0] for row in conn.execute("SELECT host FROM results WHERE run_id = ?", (run_id,))}
    assert hosts == {"localhost"}, "no measurement duplicated under the other name"
