"""The one mapping of a recipe's stack manifest to the build roles' variables
(bwtune.recipes.apply.build_vars): every stack input a recipe records lands in a variable
that its role's meta/argument_specs.yml declares, with a value of the declared type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import stack_info
from bwtune.recipes import apply
from tests.unit.recipes.recipe_store import STACK

ROLES = Path(__file__).resolve().parents[3] / "roles"
TYPES = {"str": str, "bool": bool, "list": list, "int": int}


def options(role: str) -> dict[str, Any]:
    spec = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"]


def recipe(**components: Any) -> dict[str, Any]:
    return {"stack": {"components": components, "recorded": True}}


def test_every_stack_component_is_mapped_or_said_why_not() -> None:
    mapped = set(apply.BUILD_VARS) | set(apply.NOT_BUILT)
    assert set(stack_info.COMPONENT_KEYS) == mapped
    assert not set(apply.BUILD_VARS) & set(apply.NOT_BUILT)


@pytest.mark.parametrize("component", sorted(apply.BUILD_VARS))
def test_each_mapped_variable_is_declared_by_its_role(component: str) -> None:
    for role, variable in apply.BUILD_VARS[component]:
        assert variable in options(role), f"{component}: {role} declares no {variable}"


def test_every_input_of_a_full_recipe_lands_in_a_declared_role_variable_of_its_type() -> None:
    components = {k: v for k, v in STACK.items() if k != "fingerprint"}
    found = apply.build_vars(recipe(**components))
    declared = {var: role for pairs in apply.BUILD_VARS.values() for role, var in pairs}
    assert set(found) <= set(declared)
    for variable, value in found.items():
        spec = options(declared[variable])[variable]
        assert isinstance(value, TYPES[spec.get("type", "str")]), (variable, value, spec)
    # Each recorded input that the build takes is in some variable (the SGLang version follows
    # from the commit; sgl-kernel is built from it; the driver is the host's).
    for component in components:
        if component in apply.NOT_BUILT or component == "sglang":
            continue
        assert any(var in found for _role, var in apply.BUILD_VARS[component]), component
    assert found["torch_version"] == STACK["torch"]
    assert found["sgl_kernel_sglang_commit"] == STACK["sglang_commit"]
    assert found["sglang_flashinfer_version"] == STACK["flashinfer"]
    assert found["cuda_toolkit_version"] == found["torch_expected_cuda"] == STACK["cuda"]
    assert found["sgl_kernel_require_targets"] == ["sm_120a"] and found["sgl_kernel_enable_fp4"] is True
    assert "sglang_package" not in found  # the commit pins SGLang


def test_a_release_without_a_commit_pins_the_sglang_package_and_a_long_cuda_its_release() -> None:
    found = apply.build_vars(recipe(sglang="0.5.23", sglang_commit=None, cuda="12.8.1"))
    assert found == {
        "sglang_package": "sglang==0.5.23",
        "cuda_toolkit_version": "12.8",
        "torch_expected_cuda": "12.8.1",
    }


def test_what_the_run_did_not_record_pins_nothing() -> None:
    assert apply.build_vars(recipe(torch="unknown", flashinfer="", sglang=None)) == {}
    assert apply.build_vars({"stack": {"components": None, "recorded": False}}) == {}
