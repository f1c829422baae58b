"""bwtune.app.recipe_service: what recipe_apply.yml is given for a recipe (the stack's pinned
inputs, the simulated stack's packages, the checkpoint's revision and shards) and the `-e`
words that start servers and sweeps from the built stack; `recipe verify --apply-stack`'s
refusal on hosts that are not simulated. No Ansible: recorded events (test_apply.FakeAnsible)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bwtune import ansible_run, cli, exit_codes
from bwtune.app import recipe_service
from bwtune.recipes import apply, recipe_file
from tests.unit.recipes.recipe_store import RUN, STACK
from tests.unit.recipes.test_apply import FakeAnsible, edited, fake, recipe_path  # noqa: F401
from tests.unit.recipes.test_check import host_facts


@pytest.fixture
def recipe(db: sqlite3.Connection) -> dict[str, Any]:
    return recipe_file.build(db, RUN)


def inventory(simulated: dict[str, bool]) -> ansible_run.Inventory:
    return ansible_run.Inventory(
        Path("inventory.yml"), {h: {"bwtune_simulated": s} for h, s in simulated.items()}
    )


def test_a_simulated_stack_records_torch_flashinfer_and_sglang_with_its_commit(
    recipe: dict[str, Any],
) -> None:
    assert recipe_service.simulated_packages(recipe) == [
        {"name": "torch", "version": STACK["torch"]},
        {"name": "flashinfer-python", "version": STACK["flashinfer"]},
        {"name": "sglang", "version": STACK["sglang"], "commit": STACK["sglang_commit"]},
    ]
    # What it cannot carry is said, not pretended.
    assert recipe_service.not_simulated_parts(recipe) == [
        "CUDA (torch build)", "sgl-kernel", "sgl-kernel build (GPU targets, FP4 ops)",
    ]  # fmt: skip


def test_real_hosts_go_to_provision_yml_simulated_ones_to_the_simulated_stack(recipe: dict[str, Any]) -> None:
    request = recipe_service.StepsRequest(
        inventory({"gpu-1": False, "sim-1": True, "gpu-2": False}), recipe, build_hosts=["gpu-1", "sim-1"]
    )
    found = recipe_service.extravars(request)
    inputs = apply.build_vars(recipe)
    assert {k: found[k] for k in inputs} == inputs  # provision.yml reads the build roles' variables
    assert found["provision_hosts"] == ["gpu-1"] and found["recipe_simulated_hosts"] == ["sim-1"]
    assert found["recipe_hosts"] == ["gpu-1", "sim-1"] and found["recipe_checkpoint_hosts"] == []
    assert found["recipe_fingerprint"] == apply.stack_fingerprint(inputs) and found["recipe_scratch"] is False
    assert "checkpoint_revision" not in found and found["recipe_shards"] == {}


def test_the_stack_python_words_point_each_host_at_its_built_stack() -> None:
    assert recipe_service.stack_python_vars({}, "server_python") == []
    words = recipe_service.stack_python_vars({"a": "/s/f/bin/python"}, "server_python")
    assert words[0] == "-e"
    found = json.loads(words[1])
    assert found["recipe_stack_pythons"] == {"a": "/s/f/bin/python"}
    # A host not built keeps its own: the server role's default.
    assert "default(lookup('bwtune.sglang.node_var', 'bwtune_stack_python'))" in found["server_python"]
    (sweep,) = recipe_service.sweep_vars({"a": "/s/f/bin/python"}, ["a"])
    assert json.loads(sweep)["sweep_launch_command"][1:] == ["-m", "bwtune.standin"]


def test_a_recipe_with_a_revision_and_shards_fetches_and_holds_the_checkpoint_to_them(
    recipe_path: Path,  # noqa: F811
    fake: Callable[..., FakeAnsible],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    def pinned(data: dict[str, Any]) -> None:
        data["checkpoint"].update(
            revision="c" * 40, shards={"model-00001.safetensors": "d" * 64}, recorded=True
        )

    ansible = fake({"a": host_facts(), "b": host_facts()}, True)
    assert (
        cli.main(["recipe", "apply", str(edited(recipe_path, pinned)), "-i", "inventory.yml"])
        == exit_codes.OK
    )
    out = capsys.readouterr().out
    steps = ansible.calls[1]
    assert steps["playbook"] == recipe_service.RECIPE_PLAYBOOK and steps["limit"] == "a,b"
    assert steps["extravars"]["checkpoint_revision"] == "c" * 40
    assert steps["extravars"]["recipe_shards"] == {"model-00001.safetensors": "d" * 64}
    assert steps["extravars"]["recipe_checkpoint_hosts"] == ["a", "b"]
    assert steps["extravars"]["recipe_simulated_hosts"] == []  # the stacks are the recipe's already
    assert (
        "a: checkpoint at revision " + "c" * 40 + " fetched and verified, 1 shard hashes the recipe's" in out
    )


def test_verify_apply_stack_on_a_host_that_is_not_simulated_is_refused_before_anything_is_built(
    recipe_path: Path,  # noqa: F811
    fake: Callable[..., FakeAnsible],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    def real(data: dict[str, Any]) -> None:
        data["simulated"] = False

    older = host_facts(fingerprint="sha256:000000000000", torch__version="2.11.0+cu130")
    ansible = fake({"gpu-1": older}, False)
    argv = ["recipe", "verify", str(edited(recipe_path, real)), "-i", "inventory.yml", "--apply-stack"]
    assert cli.main(argv) == exit_codes.BAD_INPUT
    captured = capsys.readouterr()
    assert [c["playbook"] for c in ansible.calls] == ["facts.yml"]
    (line,) = captured.err.splitlines()
    assert line.startswith("bwtune recipe verify: --apply-stack: gpu-1 is not simulated: a scratch stack")
    assert captured.out == ""
