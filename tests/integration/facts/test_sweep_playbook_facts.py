"""playbooks/sweep.yml gathers facts on the node and resolves `gpu: auto` there (check mode: plan only);
facts and sweep resolve nvidia-smi and the stack Python the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ansible_runner
import yaml

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "examples" / "demo.yml"
LOCAL = REPO / "inventory" / "local.yml"


def check_mode_plan(
    tmp_path: Path, matrix: dict[str, Any], host_vars: dict[str, Any], inv: Path | None = None
) -> Run:
    """ansible-playbook --check through ansible-runner; each task's result for the host."""
    if inv is None:
        inv = tmp_path / "inventory.yml"
        host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, **host_vars}
        inv.write_text(yaml.safe_dump({"all": {"hosts": {"node": host}}}), encoding="utf-8")
    extra = {"sweep_matrix": matrix, "sweep_results_dir": str(tmp_path / "results")}
    (tmp_path / "runner").mkdir(exist_ok=True)
    os.environ.pop("BWTUNE_STANDIN_PROFILE", None)  # the stand-in's default: 8x RTX PRO 6000
    done = ansible_runner.run(
        private_data_dir=str(tmp_path / "runner"),
        playbook=str(REPO / "playbooks" / "sweep.yml"),
        inventory=str(inv),
        extravars=extra,
        cmdline="--check",
        quiet=True,
        envvars={"PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")},
    )
    tasks: dict[str, dict[str, Any]] = {}
    for event in done.events:
        data = event.get("event_data", {})
        if event.get("event") in ("runner_on_ok", "runner_on_failed"):
            tasks[data["task"]] = data["res"]
    return Run(done.rc, tasks)


@dataclass
class Run:
    rc: int
    tasks: dict[str, dict[str, Any]]


def demo_matrix() -> dict[str, Any]:
    matrix = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    matrix["model"]["path"] = str(DEMO.parent / matrix["model"]["path"])
    matrix["hardware"]["gpu"] = "auto"
    return matrix


def test_simulated_node_gets_the_standins_gpus_and_auto_resolves_to_sm120(tmp_path: Path) -> None:
    stack_python = {"bwtune_simulated": True, "bwtune_stack_python": sys.executable}
    done = check_mode_plan(tmp_path, demo_matrix(), stack_python)
    assert done.rc == 0, done.tasks
    gpu = done.tasks["Gather GPU facts"]["ansible_facts"]["bwtune_gpu"]
    assert gpu["sm"] == "sm120" and gpu["count"] == 8
    plan = done.tasks["Plan the sweep"]
    assert plan["plan"]["gpu"] == "sm120"
    stack = done.tasks["Gather software stack facts"]["ansible_facts"]["bwtune_stack"]
    assert stack["sglang"]["installed"] is False and stack["python"] == sys.executable
    # The Python whose fingerprint the results carry is the one that launches the servers.
    assert plan["invocation"]["module_args"]["python"] == sys.executable


def test_facts_and_sweep_see_the_same_gpus_on_the_local_inventory(tmp_path: Path) -> None:
    """`bwtune facts -i inventory/local.yml` and a sweep on it: one nvidia-smi, one stack Python."""
    env = {**os.environ, "BWTUNE_HOME": str(tmp_path / "home")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("BWTUNE_STANDIN_PROFILE", None)
    argv = [sys.executable, "-m", "bwtune.cli", "facts", "-i", str(LOCAL), "--quiet", "--json"]
    facts = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240, check=False)
    assert facts.returncode == 0, facts.stderr
    by_facts = json.loads(facts.stdout)["hosts"]["localhost"]
    swept = check_mode_plan(tmp_path, demo_matrix(), {}, inv=LOCAL)
    assert swept.rc == 0, swept.tasks
    gpu = swept.tasks["Gather GPU facts"]["ansible_facts"]["bwtune_gpu"]
    assert by_facts["bwtune_gpu"] == gpu and gpu["sm"] == "sm120" and gpu["count"] == 8
    stack = swept.tasks["Gather software stack facts"]["ansible_facts"]["bwtune_stack"]
    assert by_facts["bwtune_stack"]["fingerprint"] == stack["fingerprint"]
    # The local inventory's stack is the controller's Python, which the stand-in runs from.
    assert stack["python"] == sys.executable
    assert by_facts["bwtune_checkpoint"]["available"] is True


def test_node_without_nvidia_smi_fails_auto_with_one_line_but_explicit_gpu_plans(tmp_path: Path) -> None:
    no_smi = {"bwtune_nvidia_smi": str(tmp_path / "missing" / "nvidia-smi")}
    done = check_mode_plan(tmp_path, demo_matrix(), no_smi)
    assert done.rc != 0
    failed = done.tasks["Plan the sweep"]
    assert "hardware.gpu" in failed["msg"] and "nvidia-smi" in failed["msg"]
    explicit = demo_matrix()
    explicit["hardware"]["gpu"] = "sm120"
    done = check_mode_plan(tmp_path, explicit, no_smi)
    assert done.rc == 0, done.tasks
    assert done.tasks["Plan the sweep"]["plan"]["gpu"] == "sm120"
