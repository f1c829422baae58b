"""`bwtune recipe check`: a recipe against hosts' facts (read only), and its refusals."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bwtune import cli, exit_codes
from bwtune.recipes import check, recipe_file
from tests.unit.recipes.recipe_store import RUN, STACK


def host_facts(**changes: Any) -> dict[str, Any]:
    """A host's bwtune_gpu and bwtune_stack whose stack components are STACK's."""
    stack = {
        "fingerprint": STACK["fingerprint"],
        "driver_version": STACK["driver"],
        "torch": {"version": STACK["torch"], "cuda": STACK["cuda"]},
        "sgl_kernel": {
            "version": STACK["sgl_kernel"],
            "sm_targets": ["sm120a"],
            "fp4_ops": ["cutlass_scaled_fp4_mm"],
        },
        "sglang": {"version": STACK["sglang"], "git_commit": STACK["sglang_commit"]},
        "flashinfer": {"version": STACK["flashinfer"]},
    }
    for path, value in changes.items():
        part, _, key = path.partition("__")
        if key:
            stack[part][key] = value
        else:
            stack[part] = value
    return {"bwtune_gpu": {"available": True, "sm": "sm120", "count": 8}, "bwtune_stack": stack}


@pytest.fixture
def recipe(db: sqlite3.Connection) -> dict[str, Any]:
    return recipe_file.build(db, RUN)


def test_a_host_with_the_recipes_stack_is_of_its_group_and_nothing_differs(recipe: dict[str, Any]) -> None:
    found = check.check_host(recipe, "gpu-c", host_facts())
    assert found.in_group and found.reason is None and found.differ == []
    assert check.describe(found)[1] == "  stack inputs: the recipe's"


def test_a_different_sglang_commit_is_named_and_apply_would_rebuild(recipe: dict[str, Any]) -> None:
    found = check.check_host(recipe, "gpu-c", host_facts(fingerprint="other", sglang__git_commit="b" * 40))
    assert not found.in_group and "stack other" in (found.reason or "")
    assert [d["name"] for d in found.differ] == ["sglang_commit"]
    assert found.differ[0]["recipe"] == "a" * 40 and found.differ[0]["host"] == "b" * 40
    assert any(line.startswith("need a stack with SGLang commit") for line in found.apply_would)


def test_a_driver_difference_is_said_apply_does_not_change_it(recipe: dict[str, Any]) -> None:
    found = check.check_host(recipe, "gpu-c", host_facts(fingerprint="other", driver_version="570.1"))
    assert [d["name"] for d in found.differ] == ["driver"]
    assert any("not change the NVIDIA driver: 570.1 here" in line for line in found.apply_would)
    assert not any(line.startswith("build") for line in found.apply_would)


def test_another_gpu_is_not_of_the_group_and_apply_can_do_nothing(recipe: dict[str, Any]) -> None:
    facts = host_facts()
    facts["bwtune_gpu"]["sm"] = "sm100"
    found = check.check_host(recipe, "b200", facts)
    assert not found.in_group and "GPU sm100, the run's sm120" in (found.reason or "")
    assert found.apply_would[0].startswith("nothing it can: the GPUs are sm100")


def test_a_host_whose_facts_failed_says_so(recipe: dict[str, Any]) -> None:
    (found,) = check.check_hosts(recipe, ["x"], {}, {"x": "x: unreachable"})
    assert found.facts_failed == "x: unreachable" and check.describe(found) == [
        "x: facts could not be gathered (x: unreachable)"
    ]


def _write(tmp_path: Path, recipe: dict[str, Any]) -> Path:
    path = tmp_path / "recipe.json"
    path.write_text(recipe_file.dumps(recipe))
    return path


REAL = (
    "all:\n  hosts:\n    node1:\n      ansible_host: 192.0.2.1\n    node2:\n      ansible_host: 192.0.2.2\n"
)


@pytest.mark.parametrize("action", ["check", "verify"])
def test_a_simulated_recipe_on_hosts_not_simulated_is_refused_in_one_line(
    tmp_path: Path, recipe: dict[str, Any], capsys: pytest.CaptureFixture[str], action: str
) -> None:
    inventory = tmp_path / "real.yml"
    inventory.write_text(REAL)
    path = _write(tmp_path, recipe)
    assert cli.main(["recipe", action, str(path), "-i", str(inventory)]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert (
        "simulated" in err[0]
        and "node1, node2 are not simulated" in err[0]
        and "bwtune_simulated: true" in err[0]
    )


def test_a_real_recipe_is_not_refused_for_being_real(recipe: dict[str, Any], tmp_path: Path) -> None:
    inventory = tmp_path / "real.yml"
    inventory.write_text(REAL)
    from bwtune import ansible_run

    check.refuse_simulated(
        {**recipe, "simulated": False}, "r.json", ansible_run.load_inventory(str(inventory), None)
    )


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not JSON"),
        ('{"schema": 1}', "not a bwtune recipe: field 'kind' is missing"),
        ("[]", "not a bwtune recipe: a recipe is a JSON object"),
    ],
)
def test_a_file_that_is_not_a_recipe_is_one_line_and_exit_2(
    tmp_path: Path, content: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    inventory = tmp_path / "real.yml"
    inventory.write_text(REAL)
    assert cli.main(["recipe", "check", str(path), "-i", str(inventory)]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and str(path) in err[0]


def test_a_newer_schema_is_refused(tmp_path: Path, recipe: dict[str, Any]) -> None:
    path = _write(tmp_path, {**recipe, "schema": 2})
    with pytest.raises(recipe_file.RecipeError, match="schema 2: this bwtune reads recipe schema 1"):
        recipe_file.load(str(path))
    assert json.loads(path.read_text())["schema"] == 2
