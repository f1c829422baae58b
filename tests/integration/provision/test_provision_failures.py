"""provision.yml on localhost with the fixture SGLang checkout: failures fail early or leave `current`.

The successful path (build, verify, idempotence with no compiler run) is molecule's
`default` scenario (scripts/molecule-all.sh); these are the failures around it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import stack_root as sl
from tests.integration.provision.scenario import REPO, nvcc_calls, prepare

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("provision")
    info = prepare(base)
    info["base"] = base
    return info


def provision(scn: dict, overrides: dict, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        str(BIN / "ansible-playbook"),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-e",
        f"@{scn['base'] / 'vars.yml'}",
        "-e",
        json.dumps(overrides),
        *args,
        str(REPO / "playbooks" / "provision.yml"),
    ]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", ANSIBLE_NOCOLOR="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


def fake_current(root: Path, scn: dict) -> str:
    """A verified stack that `current` points at, built from other inputs (an older commit)."""
    inputs = {
        "torch_version": scn["vars"]["torch_version"],
        "sglang_commit": "0" * 40,
        "cuda_version": "13.0",
        "python_version": "3.11",
        "arch": platform.machine(),
        "flashinfer_version": scn["vars"]["sglang_flashinfer_version"],
        "options": {"enable_fp4": True},
    }
    sl.write_manifest(str(root), inputs, verified=True)
    fp = sl.fingerprint(inputs)
    sl.switch_current(str(root), fp)
    return fp


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"preflight_supported_sm": ["sm120", "sm999"]}, "preflight_supported_sm"),
        (
            {"torch_version": "2.12-nightly"},
            "build input torch_version='2.12-nightly' is not a PEP 440 version",
        ),
        ({"sgl_kernel_repo": "/nonexistent/sglang"}, "sgl_kernel_repo: /nonexistent/sglang does not exist"),
    ],
    ids=["unknown-sm", "malformed-torch-pin", "missing-repository"],
)
def test_bad_variables_fail_before_anything_is_built(scenario: dict, overrides: dict, message: str) -> None:
    root = scenario["base"] / f"stacks-bad-{next(iter(overrides))}"
    before = nvcc_calls(scenario["base"])
    proc = provision(scenario, {"bwtune_stack_root": str(root), **overrides})
    assert proc.returncode == 2, proc.stdout[-3000:]
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith(("fatal:", "failed:"))]
    assert len(failed) == 1 and message in failed[0], proc.stdout[-3000:]
    if "sm999" in str(overrides):
        assert "sm999" in failed[0]
    assert not root.exists()  # nothing built, not even the stack directory
    assert nvcc_calls(scenario["base"]) == before


def test_fp4_off_and_a_broken_build_leave_current_alone(scenario: dict) -> None:
    root = scenario["base"] / "stacks-failing"
    wheels = scenario["base"] / "wheels-failing"
    was = fake_current(root, scenario)
    common = {"bwtune_stack_root": str(root), "sgl_kernel_wheel_cache": str(wheels)}

    # FP4 off: the build succeeds, the verification finds no sm_120a, nothing is cached.
    before = nvcc_calls(scenario["base"])
    proc = provision(scenario, {**common, "sgl_kernel_enable_fp4": False})
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "carries sm_90; missing sm_120a" in proc.stdout, proc.stdout[-3000:]
    assert nvcc_calls(scenario["base"]) > before  # it did compile
    assert sl.current(str(root)) == was
    assert not list(wheels.glob("*/*.whl"))

    # A commit whose kernel does not compile: the build fails mid-way and says why.
    before = nvcc_calls(scenario["base"])
    proc = provision(scenario, {**common, "sgl_kernel_sglang_commit": scenario["commits"]["broken"]})
    assert proc.returncode == 2, proc.stdout[-3000:]
    fatal = next(ln for ln in proc.stdout.splitlines() if ln.startswith("fatal:"))
    assert "sgl-kernel build failed (exit 1); log " in fatal
    assert "fp4_roundtrip.cu" in fatal  # the log's tail names the failing source
    assert nvcc_calls(scenario["base"]) > before
    assert sl.current(str(root)) == was
    assert not list(wheels.glob("*/*.whl"))
    # Neither attempt is verified; both stay out of `current`'s way until pruned.
    assert [fp for fp in sl.stacks(str(root)) if sl.is_verified(str(root), fp)] == [was]


def test_cli_check_says_what_would_be_built_and_why(scenario: dict, tmp_path: Path) -> None:
    root = scenario["base"] / "stacks-check"
    was = fake_current(root, scenario)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        "all:\n  hosts:\n    node1:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
    )
    before = nvcc_calls(scenario["base"])
    cmd = [
        str(BIN / "bwtune"),
        "provision",
        "-i",
        str(inventory),
        "--check",
        "--quiet",
        "-e",
        f"@{scenario['base'] / 'vars.yml'}",
        "-e",
        json.dumps({"bwtune_stack_root": str(root)}),
    ]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("node1: stack ")]
    assert len(lines) == 1, proc.stdout
    commit = scenario["commits"]["main"]
    assert " would be built: " in lines[0]
    assert f"sglang_commit: 000000000000 -> {commit[:12]}" in lines[0]
    assert "option enable_fp4" not in lines[0]  # unchanged inputs are not named
    assert sorted(os.listdir(root)) == sorted(["current", "history.json", was])  # nothing written
    assert nvcc_calls(scenario["base"]) == before
