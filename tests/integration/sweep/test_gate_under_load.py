"""The correctness gate under load: a config whose kernel corrupts output only in large
batches passes the one-at-a-time gate prompts, is caught on the workload's own concurrent
requests, and cannot win however fast it is."""

from __future__ import annotations

import sys

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner

from .conftest import PROFILE, Node, read_lines

STANDIN = [sys.executable, "-m", "bwtune.standin"]


@pytest.fixture
def batch_garbage_node(node: Node, monkeypatch: pytest.MonkeyPatch) -> Node:
    """The test node, its stand-in profile with one more row: the fastest config of all,
    whose output is garbage once 6 or more requests are in the server (the gate sends 5)."""
    profile = yaml.safe_load(PROFILE.read_text())
    profile["decode"]["adjustments"].append(
        {"match": {"cuda-graph-max-bs-decode": 104}, "step_factor": 0.3, "why": "test: fastest"}
    )
    profile.setdefault("faults", []).append(
        {"match": {"cuda-graph-max-bs-decode": 104}, "fault": "garbage-above-batch:6", "why": "test"}
    )
    path = node.root / "profile-batch-garbage.yml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    node.env["BWTUNE_STANDIN_PROFILE"] = str(path)
    for key in ("PATH", "BWTUNE_STANDIN_PROFILE", "BWTUNE_STANDIN_STARTUP_SCALE", "BWTUNE_STANDIN_STATE_DIR"):
        monkeypatch.setenv(key, node.env[key])
    return node


def test_a_config_broken_only_in_large_batches_gets_wrong_output_and_cannot_win(batch_garbage_node):
    node = batch_garbage_node
    matrix = node.matrix(["ok-base", "ok-fastest", "batch-garbage"])
    matrix["bundles"]["case"]["batch-garbage"] = {"cuda-graph-max-bs-decode": 104}
    matrix["workloads"] = [
        {"name": "batch", "input_len": 32, "output_len": 16, "concurrency": 12, "num_prompts": 12,
         "warmup": 0, "estimate_s": 1},
    ]  # fmt: skip
    matrix["objective"] = {"workload": "batch", "metric": "output_throughput", "goal": "max"}
    opts = sweep_runner.SweepOptions(
        matrix=matrix,
        results_path=str(node.results_path("under-load")),
        run_id="under-load",
        port=node.port,
        simulated=True,
        launch_command=STANDIN,
        strategy="grid",  # every case launched (the module's default is adaptive)
        env={
            k: node.env[k]
            for k in ("BWTUNE_STANDIN_PROFILE", "BWTUNE_STANDIN_STARTUP_SCALE", "BWTUNE_STANDIN_STATE_DIR")
        },
        startup_timeout_s=30,
        stop_grace_s=5,
        release_timeout_s=10,
    )
    sweep_runner.run_sweep(opts, sweep_runner.make_plan(opts))
    lines = {line["point"]["case"]: line for line in read_lines(node.results_path("under-load"))}
    broken = lines["batch-garbage"]
    # It answered the gate's prompts (5 at once, under the batch size that breaks it)...
    assert broken["timings"].get("gate_s") is not None
    # ...and its own workload's concurrent requests gave it away.
    assert broken["status"] == "wrong-output", broken
    assert "under load" in broken["failure"]["message"] and "'!'" in broken["failure"]["message"]
    assert lines["ok-base"]["status"] == lines["ok-fastest"]["status"] == "ok"
    best = results_contract.pick_best(lines.values(), matrix["objective"])
    assert best is not None and best["point"]["case"] == "ok-fastest"
