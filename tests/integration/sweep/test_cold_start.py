"""A launch records its cold start (process start -> port -> /health -> ready -> first token),
and the breakdown follows the stand-in's simulated start-up phases: a profile with a longer
weight load gives a longer time to /health. The recorded lines go through `bwtune import`,
`export --json`, `report` and `plan` unchanged."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner
from bwtune.cli import main

from .conftest import PROFILE, Node, read_lines

STANDIN = [sys.executable, "-m", "bwtune.standin"]
SCALE = 0.01  # the node's BWTUNE_STANDIN_STARTUP_SCALE: profile seconds x this
LONG_LOAD_S = 250.0  # x SCALE: 2.5 s of simulated weight load
CAPTURE_S = 10.0  # x SCALE: 0.1 s of simulated graph capture


def _sweep(node: Node, run_id: str, weight_load_s: float, cases: list[str]) -> dict[str, dict[str, Any]]:
    """One sweep of `cases` on a copy of the test profile with this weight load; lines by case."""
    profile = yaml.safe_load(PROFILE.read_text())
    profile["startup"].update(weight_load_s=weight_load_s, graph_capture_s=CAPTURE_S)
    path = node.root / f"profile-{run_id}.yml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    env = {
        "BWTUNE_STANDIN_PROFILE": str(path),
        "BWTUNE_STANDIN_STARTUP_SCALE": str(SCALE),
        "BWTUNE_STANDIN_STATE_DIR": node.env["BWTUNE_STANDIN_STATE_DIR"],
    }
    opts = sweep_runner.SweepOptions(
        matrix=node.matrix(cases),
        results_path=str(node.results_path(run_id)),
        run_id=run_id,
        port=node.port,
        simulated=True,
        launch_command=STANDIN,
        strategy="grid",  # every case launched (the module's default is adaptive)
        env=env,
        startup_timeout_s=30,
        stop_grace_s=5,
        release_timeout_s=10,
        node_lock=str(node.root / f"{run_id}.node.lock"),  # this process still holds the last one's
    )
    sweep_runner.run_sweep(opts, sweep_runner.make_plan(opts))
    return {line["point"]["case"]: line for line in read_lines(node.results_path(run_id))}


@pytest.fixture
def standin_path(node: Node, monkeypatch: pytest.MonkeyPatch) -> Node:
    """The fake nvidia-smi on PATH, as the stand-in's node has it."""
    monkeypatch.setenv("PATH", node.env["PATH"])
    return node


def test_the_cold_start_follows_the_simulated_start_up_and_reaches_the_report(
    standin_path: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    node = standin_path
    short = _sweep(node, "short-load", 1.0, ["ok-base"])["ok-base"]
    long_run = _sweep(node, "long-load", LONG_LOAD_S, ["ok-base", "oom"])
    long, oom = long_run["ok-base"], long_run["oom"]
    node.assert_nothing_left()

    for line in (short, long, oom):
        results_contract.validate_line(line)
    cold, quick = long["cold_start"], short["cold_start"]
    assert cold["reached"] == quick["reached"] == "first_token"
    # The simulated weight load is slept through before /health answers 200: a lower bound.
    assert cold["to_health_s"] >= LONG_LOAD_S * SCALE
    assert quick["to_health_s"] < cold["to_health_s"]
    # The stand-in binds its port before it loads (its /health says 503 meanwhile).
    assert cold["process_to_listen_s"] < cold["to_health_s"]
    assert cold["to_health_s"] <= cold["to_ready_s"] <= cold["to_first_token_s"]
    assert cold["failed_after_s"] is None
    # A launch that failed in graph capture got as far as its port, never to /health.
    assert oom["status"] == "oom"
    assert oom["cold_start"]["reached"] == "listening"
    assert oom["cold_start"]["to_health_s"] is None and oom["cold_start"]["to_first_token_s"] is None
    assert oom["cold_start"]["failed_after_s"] >= LONG_LOAD_S * SCALE

    db = tmp_path / "results.db"
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    assert main(["import", str(node.results_path("long-load")), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["export", "long-load", "--json", "--db", str(db)]) == 0
    exported = {r["point"]["case"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert exported["ok-base"]["cold_start"] == cold
    assert exported["oom"]["cold_start"] == oom["cold_start"]

    md = tmp_path / "report.md"
    assert main(["report", "long-load", "--md", str(md), "--db", str(db)]) == 0
    text = md.read_text()
    section = text.split("## Cold start per launch")[1].split("\n## ")[0]
    assert "SIMULATED (bwtune stand-in)" in section
    assert f"`{long['config_id']}` |" in section and f"`{oom['config_id']}` |" in section

    # The next plan of this GPU does not price real GPUs with these simulated launches: it keeps
    # the matrix's estimate and says how many stand-in launches it left out (issue 20 #4).
    matrix = node.write_matrix(node.matrix(["ok-base", "ok-fastest"]))
    capsys.readouterr()
    assert main(["plan", str(matrix), "--json", "--db", str(db)]) == 0
    estimate = json.loads(capsys.readouterr().out)["summary"]["estimate"]
    assert estimate["source"] == "matrix"
    assert estimate["simulated"] is False and estimate["left_out_launches"] == 1
