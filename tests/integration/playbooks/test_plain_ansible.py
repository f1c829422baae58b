"""Plain Ansible as the docs show it: `ansible-playbook` from the repo root, no bwtune CLI.

    ansible-playbook -i inventory/local.yml playbooks/sweep.yml -e sweep_matrix_file=examples/demo.yml

Each test runs that command (or it with one change) against the stand-in on this machine,
with its own HOME (so the node's results land in the test's folder), Ansible folders and
stand-in state.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_BIN = Path(sys.executable).parent
SHIPPED_PROFILE = REPO / "src" / "bwtune" / "standin" / "profiles" / "rtx-pro-6000x8-qwen35-397b-nvfp4.yml"
SWEEP_TESTS = REPO / "tests" / "integration" / "sweep"
MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
DEMO_MODEL = REPO / "examples" / "models" / "qwen35-397b-a17b-nvfp4"
DOCUMENTED = ["-i", "inventory/local.yml", "playbooks/sweep.yml", "-e", "sweep_matrix_file=examples/demo.yml"]
_FATAL = re.compile(r"^fatal: \[localhost\]: FAILED! => (\{.*\})$", re.MULTILINE)


def fast_profile(tmp_path: Path) -> Path:
    """The shipped stand-in profile at ten times its decode speed: the demo sweep in seconds."""
    profile = yaml.safe_load(SHIPPED_PROFILE.read_text(encoding="utf-8"))
    steps = profile["decode"]["baseline"]["step_ms"]
    profile["decode"]["baseline"]["step_ms"] = {size: ms / 10 for size, ms in steps.items()}
    profile["prefill"]["tokens_per_s"] *= 10
    path = tmp_path / "profile.yml"
    path.write_text(yaml.safe_dump(profile), encoding="utf-8")
    return path


def node_env(tmp_path: Path, profile: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "BWTUNE_"))}
    ansible = tmp_path / "ansible"
    env.update(
        HOME=str(tmp_path / "home"),
        PATH=str(ANSIBLE_BIN) + os.pathsep + env.get("PATH", ""),
        BWTUNE_STANDIN_PROFILE=str(profile),
        BWTUNE_STANDIN_STARTUP_SCALE="0.001",
        BWTUNE_STANDIN_STATE_DIR=str(tmp_path / "standin-state"),
        ANSIBLE_HOME=str(ansible / "home"),
        ANSIBLE_LOCAL_TEMP=str(ansible / "local-tmp"),
        ANSIBLE_REMOTE_TEMP=str(ansible / "remote-tmp"),
        ANSIBLE_ASYNC_DIR=str(ansible / "async"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="False",
    )
    return env


def ansible_playbook(
    env: dict[str, str], *args: str, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """`ansible-playbook ARGS` from the repo root, as a user types it."""
    argv = [str(ANSIBLE_BIN / "ansible-playbook"), *args]
    return subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def results_files(env: dict[str, str]) -> list[Path]:
    return sorted(Path(env["HOME"]).glob(".local/share/bwtune/sweeps/*/results.jsonl"))


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def live_standins(env: dict[str, str]) -> list[int]:
    """Stand-ins of this test still alive (each records itself in the test's state dir)."""
    state = Path(env["BWTUNE_STANDIN_STATE_DIR"])
    return [
        int(p.stem) for p in state.glob("*.json") if p.stem.isdigit() and Path(f"/proc/{p.stem}").exists()
    ]


def fatal(stdout: str) -> dict[str, Any]:
    found = _FATAL.findall(stdout)
    assert len(found) == 1, stdout[-3000:]
    return dict(json.loads(found[0]))


@pytest.mark.slow
def test_the_documented_command_sweeps_the_demo_from_the_repo_root(tmp_path: Path) -> None:
    env = node_env(tmp_path, fast_profile(tmp_path))
    done = ansible_playbook(env, *DOCUMENTED)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # Following a healthy sweep is one quiet task, not a retry per poll (issue 20 #28).
    assert "FAILED - RETRYING" not in done.stdout, done.stdout[-4000:]
    [results] = results_files(env)
    lines = read_lines(results)
    status = Counter(line["status"] for line in lines)
    # The default strategy (adaptive) launches some of the 6 valid configs; every launch is ok,
    # and the pruned and duplicate configs are recorded without a launch.
    assert set(status) == {"ok", "pruned", "duplicate"}, status
    assert status["pruned"] == 3 and status["duplicate"] == 3 and 1 <= status["ok"] <= 6, status
    for line in lines:
        # The matrix's relative model.path is relative to examples/demo.yml, not to the
        # current directory or playbooks/.
        assert line["argv"][:2] == ["--model-path", str(DEMO_MODEL)]
        assert line["simulated"] is True and line["gpu"] == "sm120"
    launched = [line for line in lines if line["status"] == "ok"]
    # The local inventory's stack Python (the controller's) launches the stand-in, and its
    # fingerprint is on every result.
    assert {os.path.realpath(line["launch_command"][0]) for line in launched} == {
        os.path.realpath(sys.executable)
    }
    assert len({line["stack_fingerprint"] for line in launched}) == 1
    assert launched[0]["stack_fingerprint"] not in ("", "unknown", None)
    # The play ends with its summary, shown without -v.
    summary = done.stdout[done.stdout.index("TASK [bwtune.sglang.sweep : Summarize the sweep]") :]
    ok = status["ok"]
    assert (
        f"12 configs, {ok} launched, {ok} measured ok, 0 failed, {12 - ok} not launched (simulated)"
        in summary
    )
    not_launched = re.search(r'"not launched: ([^"]*)"', summary)
    assert not_launched is not None, summary
    left_out = {f"left out by adaptive {6 - ok}"} if ok < 6 else set()
    assert set(not_launched.group(1).split(", ")) == {"duplicate 3", "pruned 3", *left_out}
    best = re.search(r'"best: (c[0-9a-f]{10}) \[', summary)
    assert best is not None and best.group(1) in {line["config_id"] for line in launched}
    assert f"results: {results}" in summary
    assert live_standins(env) == []


@pytest.mark.slow
def test_a_sweep_whose_launches_all_failed_fails_the_play_and_keeps_its_results(tmp_path: Path) -> None:
    shutil.copytree(MODEL, tmp_path / "model")
    matrix = yaml.safe_load((SWEEP_TESTS / "matrix.yml").read_text(encoding="utf-8"))
    matrix["model"]["path"] = "model"  # relative to the matrix file: tmp_path/model
    matrix["axes"]["case"] = ["invalid-args", "oom", "pruned"]
    matrix_file = tmp_path / "all-fail.yml"
    matrix_file.write_text(yaml.safe_dump(matrix), encoding="utf-8")
    env = node_env(tmp_path, SWEEP_TESTS / "profile.yml")

    done = ansible_playbook(env, *DOCUMENTED[:-1], f"sweep_matrix_file={matrix_file}", "-e", "sweep_poll_s=1")
    assert done.returncode == 2, done.stdout[-4000:]
    failed = fatal(done.stdout)
    assert failed["msg"].startswith("no config was measured: all 2 launches failed (invalid-args 1, oom 1)")
    # It is the play's last task, after the summary.
    assert done.stdout.index("Summarize the sweep") < done.stdout.index(
        "Fail the host when no config was measured"
    )
    assert "failed by class: invalid-args 1, oom 1" in done.stdout
    [results] = results_files(env)
    assert sorted(line["status"] for line in read_lines(results)) == ["invalid-args", "oom", "pruned"]
    assert all(line["argv"][1] == str(tmp_path / "model") for line in read_lines(results))
    assert live_standins(env) == []


def test_check_mode_prints_the_plan_without_verbose_and_launches_nothing(tmp_path: Path) -> None:
    env = node_env(tmp_path, fast_profile(tmp_path))
    done = ansible_playbook(env, *DOCUMENTED, "--check")
    assert done.returncode == 0, done.stdout[-4000:]
    shown = done.stdout[done.stdout.index("TASK [bwtune.sglang.sweep : Show the plan]") :]
    shown = shown[: shown.index("TASK [", 1)]
    table = [str(row) for row in json.loads(shown[shown.index("{") : shown.rindex("}") + 1])["msg"]]
    assert table[0] == f"SGLang 0.5.23 on sm120: {DEMO_MODEL}"
    assert table[1].split() == [
        "id",
        "moe-runner-backend",
        "fp4-gemm-backend",
        "speculative",
        "status",
        "reason",
    ]
    rows = [row.split() for row in table[3:-1]]
    assert len(rows) == 12 and Counter(row[4] for row in rows) == {"valid": 6, "pruned": 3, "duplicate": 3}
    assert all(row[5:] == ["hardware:", "sm100-only-moe-runner"] for row in rows if row[4] == "pruned")
    assert table[-1] == "12 configs: 6 valid, 3 pruned, 3 duplicates; 6 launches x 2 workloads"
    assert results_files(env) == [] and not (Path(env["HOME"]) / ".local").exists()
    assert live_standins(env) == []


def test_out_of_range_role_variables_fail_in_one_line_before_anything_starts(tmp_path: Path) -> None:
    # sweep_poll_s=0 passed the argument specs, started the sweep, then the play divided by zero
    # and left the sweep running unfollowed (issue 21 #9, #13).
    env = node_env(tmp_path, fast_profile(tmp_path))
    bad = {
        "sweep_poll_s": 0,
        "sweep_port": 70000,
        "sweep_launch_command": "python3 -m sglang.launch_server",
        "sweep_results_dir": "",
        "sweep_startup_timeout_s": -1,
    }
    done = ansible_playbook(env, *DOCUMENTED, "-e", json.dumps(bad))
    assert done.returncode == 2, done.stdout[-4000:]
    message = fatal(done.stdout)["msg"]
    assert "\n" not in message
    assert "sweep_poll_s: 0 is out of range" in message
    assert "sweep_port: 70000 is not a port (1-65535)" in message
    assert 'sweep_launch_command: "python3 -m sglang.launch_server" is a string' in message
    assert 'sweep_results_dir: "" must be an absolute or ~-relative folder' in message
    assert "sweep_startup_timeout_s: -1 is out of range" in message
    tasks = re.findall(r"^TASK \[(.*?)\]", done.stdout, re.MULTILINE)
    assert tasks[1:] == ["bwtune.sglang.sweep : Check the sweep's numbers and paths"], tasks
    assert not (Path(env["HOME"]) / ".local").exists() and live_standins(env) == []


def test_attach_refuses_a_poll_interval_of_zero_in_one_line(tmp_path: Path) -> None:
    env = node_env(tmp_path, fast_profile(tmp_path))
    attach = ["-i", "inventory/local.yml", "playbooks/sweep_attach.yml"]
    done = ansible_playbook(env, *attach, "-e", json.dumps({"bwtune_run_id": "r1", "sweep_poll_s": 0}))
    assert done.returncode == 2, done.stdout[-4000:]
    assert fatal(done.stdout)["msg"].startswith("sweep_poll_s: 0 is out of range")
    assert "ZeroDivisionError" not in done.stdout + done.stderr


def test_bad_role_variables_fail_validation_one_line_each_before_anything_runs(tmp_path: Path) -> None:
    env = node_env(tmp_path, fast_profile(tmp_path))
    bad = json.dumps({"sweep_strategy": "gird", "sweep_port": "abc", "bwtune_simulated": "perhaps"})
    done = ansible_playbook(env, *DOCUMENTED, "-e", bad)
    assert done.returncode == 2, done.stdout[-4000:]
    failed = fatal(done.stdout)
    errors = failed["argument_errors"]
    assert len(errors) == 3, errors
    assert "value of sweep_strategy must be one of: grid, coordinate, screen, adaptive, got: gird" in errors
    assert any(e.startswith("argument 'sweep_port' is of type str") for e in errors), errors
    assert any(e.startswith("argument 'bwtune_simulated' is of type str") for e in errors), errors
    assert all("\n" not in e for e in errors)
    # The validation is the first task; nothing else ran.
    assert re.findall(r"^TASK \[(.*?)\]", done.stdout, re.MULTILINE) == [
        "bwtune.sglang.sweep : Validating arguments against arg spec 'main' - "
        "Plan and run an SGLang launch-flag sweep on each host, and follow it"
    ]
    assert not (Path(env["HOME"]) / ".local").exists()


def test_the_fleet_example_inventory_parses(tmp_path: Path) -> None:
    env = {**os.environ, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True", "ANSIBLE_HOME": str(tmp_path)}
    # The yaml plugin reads .yml/.yaml/.json by default; a copy named fleet.yml needs no setting.
    env["ANSIBLE_YAML_FILENAME_EXT"] = ".yml,.yaml,.example"
    argv = [str(ANSIBLE_BIN / "ansible-inventory"), "-i", "inventory/fleet.yml.example", "--list"]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    hostvars = json.loads(done.stdout)["_meta"]["hostvars"]
    assert sorted(hostvars) == ["gpu-node-01", "gpu-node-02"]
    for host in hostvars.values():
        assert host["ansible_user"] and host["ansible_become_method"] == "ansible.builtin.sudo"
        assert host["bwtune_stack_python"] == "/opt/bwtune/stacks/current/bin/python"
        assert host["bwtune_model_path"].startswith("/")
    assert hostvars["gpu-node-02"]["sweep_port"] == 31000


@pytest.fixture(autouse=True)
def _no_leftover_servers(tmp_path: Path) -> Any:
    """A failed test must not leave its stand-ins behind."""
    yield
    state = tmp_path / "standin-state"
    for record in state.glob("*.json") if state.exists() else []:
        if record.stem.isdigit() and Path(f"/proc/{record.stem}").exists():
            with contextlib.suppress(OSError):
                os.kill(int(record.stem), signal.SIGKILL)
