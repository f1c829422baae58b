"""`bwtune provision --check` as a newcomer runs it (issue 20): the README's inventory, a
fresh two-host group. Check mode answers with the plan, or one line naming what to set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.integration.provision.scenario import REPO, nvcc_calls, prepare

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("provision-check")
    info = prepare(base)
    info["base"] = base
    return info


def bwtune_check(inventory: Path, home: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [str(BIN / "bwtune"), "provision", "-i", str(inventory), "--check", *extra]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", BWTUNE_HOME=str(home))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def test_readme_inventory_without_a_commit_names_the_variable(tmp_path: Path) -> None:
    proc = bwtune_check(REPO / "inventory" / "local.yml", tmp_path / "home")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "One or more items failed" not in out and "is undefined" not in out, out
    final = [ln for ln in out.splitlines() if ln.startswith("bwtune: host localhost failed")]
    assert len(final) == 1, out
    assert "sgl_kernel_sglang_commit is not set" in final[0], out


def test_readme_inventory_with_a_commit_prints_the_plan(scenario: dict, tmp_path: Path) -> None:
    # The sglang role's default package (the git URL at sglang_commit), as the README user has it:
    # nothing in the inventory defines sglang_commit.
    variables = {k: v for k, v in scenario["vars"].items() if k != "sglang_package"}
    variables["bwtune_stack_root"] = str(tmp_path / "stacks")
    (tmp_path / "vars.yml").write_text(yaml.safe_dump(variables))
    before = nvcc_calls(scenario["base"])
    proc = bwtune_check(
        REPO / "inventory" / "local.yml", tmp_path / "home", "--quiet", "-e", f"@{tmp_path / 'vars.yml'}"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("localhost: stack ")]
    assert " would be built: " in line, line
    assert not (tmp_path / "stacks").exists()
    assert nvcc_calls(scenario["base"]) == before


def test_a_fresh_two_host_group_says_where_the_second_host_gets_its_wheel(
    scenario: dict, tmp_path: Path
) -> None:
    inventory = tmp_path / "inventory.yml"
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node1": host, "node2": host}}}))
    overrides = {
        "bwtune_stack_root": str(tmp_path / "stacks"),
        "provision_wheelhouse": str(tmp_path / "controller-wheelhouse"),
    }
    proc = bwtune_check(
        inventory,
        tmp_path / "home",
        "--quiet",
        "-e",
        f"@{scenario['base'] / 'vars.yml'}",
        "-e",
        json.dumps(overrides),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = {ln.split(":", 1)[0]: ln for ln in proc.stdout.splitlines() if ": stack " in ln}
    assert sorted(lines) == ["node1", "node2"], proc.stdout
    assert " would be built: " in lines["node1"] and "would receive the wheel" not in lines["node1"]
    assert "would receive the wheel from node1" in lines["node2"], proc.stdout
    assert not (tmp_path / "stacks").exists() and not (tmp_path / "controller-wheelhouse").exists()
