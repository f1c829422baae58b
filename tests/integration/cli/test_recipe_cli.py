"""`bwtune recipe export` from a demo-like stand-in run, `bwtune recipe check` and `bwtune
recipe verify` of it on the local inventory (inventory/local.yml, as `bwtune demo` uses it):
the host is of the recipe's hardware group; a recipe whose torch differs names it; the same
stand-in reproduces it; a stand-in whose decode steps take 25% longer is `slower by X%`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bwtune import exit_codes
from tests.integration.cli.conftest import LOCAL_INVENTORY, bwtune_argv, run, tiny_matrix

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _profile(tmp_path: Path, env: dict[str, str], name: str, step_factor: float) -> dict[str, str]:
    profile: dict[str, Any] = yaml.safe_load(Path(env["BWTUNE_STANDIN_PROFILE"]).read_text())
    steps = profile["decode"]["baseline"]["step_ms"]
    profile["decode"]["baseline"]["step_ms"] = {k: v * step_factor for k, v in steps.items()}
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump(profile))
    return {**env, "BWTUNE_STANDIN_PROFILE": str(path)}


@pytest.fixture
def recipe(tmp_path: Path, sweep_env: dict[str, str]) -> Path:
    """A recipe exported from a one-config stand-in run on the local inventory."""
    matrix = tiny_matrix(tmp_path, ["flashinfer_cutlass"], num_prompts=8)
    node = tmp_path / "node"
    swept = run(
        bwtune_argv("sweep", "-i", str(LOCAL_INVENTORY), "-m", str(matrix), "--node-results-dir", str(node),
                    "--quiet", "--json"),
        sweep_env,
    )  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    run_id = json.loads(swept.stdout)["run_id"]
    path = tmp_path / "recipe.json"
    exported = run(bwtune_argv("recipe", "export", run_id, "-o", str(path)), sweep_env)
    assert exported.returncode == 0, exported.stderr
    return path


def _verify(recipe: Path, env: dict[str, str], tmp_path: Path) -> tuple[int, dict[str, Any], str]:
    attestation = tmp_path / "attestation.md"
    done = run(
        bwtune_argv("recipe", "verify", str(recipe), "-i", str(LOCAL_INVENTORY), "--launches", "2",
                    "--node-results-dir", str(tmp_path / "node"), "--attestation", str(attestation),
                    "--quiet", "--json"),
        env,
    )  # fmt: skip
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), attestation.read_text()


def test_a_recipe_from_a_stand_in_run_is_reproduced_and_a_slower_stand_in_is_slower(
    tmp_path: Path, sweep_env: dict[str, str], recipe: Path
) -> None:
    data = json.loads(recipe.read_text())
    assert data["simulated"] is True and data["stack"]["recorded"] is True
    assert data["hardware"]["model"] and data["results"]["launches"][0]["values"]
    config_id = data["measured"]["config_id"]

    code, outcome, attestation = _verify(recipe, sweep_env, tmp_path)
    assert (code, outcome["verdict"]) == (exit_codes.OK, "reproduced"), outcome
    assert outcome["config_id"] == config_id and len(outcome["candidate"]) == 2
    assert attestation.startswith("# Recipe verification: reproduced")
    assert "| recorded | 1 |" in attestation and "| verified | 2 |" in attestation
    assert "SIMULATED" in attestation

    slower = _profile(tmp_path, sweep_env, "slower", 1.25)
    code, outcome, attestation = _verify(recipe, slower, tmp_path)
    assert (code, outcome["verdict"]) == (exit_codes.REGRESSION, "slower"), outcome
    found = re.fullmatch(r"slower by (\d+\.\d)% \(p=[0-9.e-]+\)", outcome["line"])
    assert found and 10 < float(found.group(1)) < 30, outcome["line"]
    assert attestation.startswith(f"# Recipe verification: {outcome['line']}")


def test_check_on_the_local_inventory_gathers_facts_and_names_a_differing_input(
    tmp_path: Path, sweep_env: dict[str, str], recipe: Path
) -> None:
    argv = ["recipe", "check", str(recipe), "-i", str(LOCAL_INVENTORY)]
    done = run(bwtune_argv(*argv), sweep_env)
    assert done.returncode == exit_codes.OK, done.stdout + done.stderr
    assert "localhost: in the recipe's hardware group" in done.stdout
    assert "stack inputs: the recipe's" in done.stdout and "nothing was changed" in done.stdout

    data = json.loads(recipe.read_text())
    data["stack"]["components"]["torch"] = "2.99.0"
    data["hardware"]["stack_fingerprint"] = "0123456789ab"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    done = run(bwtune_argv("recipe", "check", str(other), "-i", str(LOCAL_INVENTORY), "--json"), sweep_env)
    assert done.returncode == exit_codes.NOT_VERIFIED, done.stderr
    (host,) = json.loads(done.stdout)["hosts"]
    assert host["host"] == "localhost" and not host["in_group"]
    assert [d["name"] for d in host["differ"]] == ["torch"] and host["differ"][0]["recipe"] == "2.99.0"
    assert any(
        line.startswith("build and switch to a stack with torch 2.99.0") for line in host["apply_would"]
    )
