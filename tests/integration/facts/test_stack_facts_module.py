"""stack_facts as Ansible runs it: a real `ansible localhost -m` process on the fake stack venv
(the probe itself is in tests/unit/facts/test_stack_info.py)."""

from __future__ import annotations

import pytest

from tests.unit.facts.conftest import cuda_libs, fake_stack  # noqa: F401  (the fixtures)
from tests.unit.facts.helpers import run_module, system_path_without_nvidia_smi


@pytest.mark.integration  # a real `ansible localhost -m` process
def test_stack_facts_module_on_fake_stack(fake_stack):  # noqa: F811
    res = run_module(
        "stack_facts",
        f"python={fake_stack['python']} driver_version=580.159.04",
        {},
        system_path_without_nvidia_smi(),
    )
    f = res["ansible_facts"]["bwtune_stack"]
    assert f["sgl_kernel"]["sm120a"] is True and f["sglang"]["flag_count"] == 4
