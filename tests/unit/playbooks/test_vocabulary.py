"""The cross-role variables' values for a host: set, defaulted, or the stand-in's on a simulated host."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import vocabulary


def host(**set_vars: Any) -> Any:
    return lambda name: set_vars.get(name)


def test_a_set_variable_wins() -> None:
    assert (
        vocabulary.value("bwtune_stack_python", host(bwtune_stack_python="/x/bin/python")) == "/x/bin/python"
    )


def test_the_stack_python_follows_the_stack_root() -> None:
    assert vocabulary.value("bwtune_stack_python", host()) == "/opt/bwtune/stacks/current/bin/python"
    assert (
        vocabulary.value("bwtune_stack_python", host(bwtune_stack_root="/srv/s"))
        == "/srv/s/current/bin/python"
    )


def test_a_simulated_host_gets_the_standins_nvidia_smi_unless_it_sets_one() -> None:
    assert vocabulary.value("bwtune_nvidia_smi", host()) == "nvidia-smi"
    fake = vocabulary.value("bwtune_nvidia_smi", host(bwtune_simulated="true"))
    assert fake.endswith(os.path.join("bwtune", "standin", "bin", "nvidia-smi")) and os.access(fake, os.X_OK)
    own = host(bwtune_simulated=True, bwtune_nvidia_smi="/usr/bin/nvidia-smi")
    assert vocabulary.value("bwtune_nvidia_smi", own) == "/usr/bin/nvidia-smi"
    assert vocabulary.value("bwtune_nvidia_smi", host(bwtune_simulated="no")) == "nvidia-smi"


def test_a_name_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(vocabulary.VocabularyError, match="bwtune_sweep_python is not a cross-role"):
        vocabulary.value("bwtune_sweep_python", host())
