"""adaptive on a real node sweep (the stand-in): two configs as fast as each other are both
measured again before a winner is declared (finals), each re-measure is a line of its own
with the full workloads only, and running the sweep again launches nothing more."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies

from .conftest import Node, read_lines

STANDIN = [sys.executable, "-m", "bwtune.standin"]


# Each sweep in a process of its own, as on a node: a sweep holds its results file's lock
# until its process ends.
RUN = """
import json, sys
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner
opts = sweep_runner.SweepOptions(**json.loads(sys.argv[1]))
outcome = sweep_runner.run_sweep(opts, sweep_runner.make_plan(opts))
print(json.dumps({"best": outcome["best"]["config_id"], "launches": outcome["summary"]["launches"]}))
"""


def _run(node: Node, matrix: dict[str, Any]) -> dict[str, Any]:
    params = {
        "matrix": matrix,
        "results_path": str(node.results_path("finals")),
        "run_id": "finals",
        "port": node.port,
        "simulated": True,
        "launch_command": STANDIN,
        "env": node.env,
        "strategy": "adaptive",
        "startup_timeout_s": 30,
        "stop_grace_s": 5,
        "release_timeout_s": 10,
        "node_lock": str(node.root / "finals.node.lock"),
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(params)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return dict(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.slow
def test_adaptive_measures_the_tied_configs_again_and_a_rerun_launches_nothing(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", node.env["PATH"])
    matrix = node.matrix(["ok-base", "ok-twin", "ok-slow"])
    # ok-twin: a graph batch size no profile rule matches, so as fast as ok-base (noise 0).
    matrix["bundles"]["case"]["ok-twin"] = {
        "moe-runner-backend": "flashinfer_cutlass",
        "cuda-graph-max-bs-decode": 17,
    }
    outcome = _run(node, matrix)
    node.assert_nothing_left()
    lines = [line for line in read_lines(node.results_path("finals")) if line["status"] == "ok"]
    by_case: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        results_contract.validate_line(line)
        by_case.setdefault(line["point"]["case"], []).append(line)
    full = [case for case, got in by_case.items() if not got[0]["screened_out"]]
    assert "ok-slow" not in full or len(by_case["ok-slow"]) == 1
    if sorted(full) == ["ok-base", "ok-twin"]:  # neither screened out: within the noise
        # Both measured again; while they stay within the measured noise the finals go on, up
        # to REPEATS launches each and REMEASURES re-measures in all (how many depends on the
        # launches' timing jitter, so the test holds the bounds, not one count).
        launches = {case: len(by_case[case]) for case in full}
        assert all(2 <= n <= strategies.REPEATS for n in launches.values()), launches
        assert sum(n - 1 for n in launches.values()) <= strategies.REMEASURES, launches
        for case in full:
            assert results_contract.SCREEN_WORKLOAD in by_case[case][0]["metrics"]
            for again_line in by_case[case][1:]:
                assert results_contract.SCREEN_WORKLOAD not in again_line["metrics"], "re-measure: full only"
    objective = results_contract.objective_of(matrix)
    assert outcome["best"] == results_contract.pick_best(lines, objective)["config_id"]
    before = node.results_path("finals").read_text()
    again = _run(node, matrix)
    assert again["launches"] == 0, "a rerun re-measures nothing it already has"
    assert node.results_path("finals").read_text().startswith(before)
    assert again["best"] == outcome["best"]
