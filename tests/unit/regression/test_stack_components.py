"""The stack components a results line records (`stack`), read from the stack facts."""

from __future__ import annotations

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from ansible_collections.bwtune.sglang.plugins.module_utils._facts import stack_info

PROBE = {
    "python": {"version": "3.12.3"},
    "torch": {"version": "2.11.0.dev20261128+cu130", "cuda": "13.0", "arch_list": ["sm_120"]},
    "sgl_kernel": {"version": "0.3.21", "path": None},
    "flashinfer": {"version": "0.5.3"},
    "sglang": {"version": "0.5.23", "path": None},
}


def test_components_name_each_part_of_the_stack() -> None:
    facts = stack_info.build_facts(PROBE, "/opt/bwtune/stacks/current/bin/python", driver_version="580.95.05")
    components = stack_info.components(facts)
    assert components == {
        "fingerprint": facts["fingerprint"],
        "torch": "2.11.0.dev20261128+cu130",
        "cuda": "13.0",
        "sglang": "0.5.23",
        "sglang_commit": None,
        "sgl_kernel": "0.3.21",
        "sgl_kernel_build": "no sm targets; fp4 ops: none",
        "flashinfer": "0.5.3",
        "driver": "580.95.05",
    }
    assert stack_info.components({}) is None


def test_a_results_line_carries_the_components_and_a_bad_one_is_refused() -> None:
    line = contract.make_line(run_id="r1", host="h", config_id="c1", status="ok", stack={"torch": "2.11"})
    contract.validate_line(line)
    with pytest.raises(contract.ResultsFormatError, match="stack must be an object or null"):
        contract.validate_line({**line, "stack": "2.11"})
    # Lines of older nodes have no stack at all and still load.
    contract.validate_line({k: v for k, v in line.items() if k != "stack"})


def test_one_list_of_components_for_the_node_and_the_controller() -> None:
    """stack_info owns the components (issue 22): a line records each declared one, in order,
    and regression attribution reads that same list, not a copy."""
    from bwtune import regression

    assert regression.COMPONENTS is stack_info.COMPONENTS
    facts = stack_info.build_facts(PROBE, "/opt/bwtune/stacks/current/bin/python", driver_version="580.95.05")
    recorded = stack_info.components(facts)
    assert recorded is not None
    assert tuple(recorded) == ("fingerprint", *stack_info.COMPONENT_KEYS)
    assert len(set(stack_info.COMPONENT_KEYS)) == len(stack_info.COMPONENTS)
    # What attribution reports of two lines' stacks names the declared components only.
    before = {"stack": recorded, "stack_fingerprint": "a"}
    after = {"stack": dict(recorded, torch="2.12.0"), "stack_fingerprint": "b"}
    changed = regression.changed_components(before, after)
    assert [c["component"] for c in changed] == ["torch"]
    assert changed[0]["name"] == dict(stack_info.COMPONENTS)["torch"]
