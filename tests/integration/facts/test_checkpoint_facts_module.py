"""checkpoint_facts as Ansible runs it: a real `ansible localhost -m` process on a generated
checkpoint directory (the directories and the pure gather are in
tests/unit/facts/test_checkpoint_info.py)."""

from __future__ import annotations

import pytest

from tests.unit.facts.helpers import run_module, system_path_without_nvidia_smi
from tests.unit.facts.test_checkpoint_info import ckpt  # noqa: F401  (the fixture)


@pytest.mark.integration  # a real `ansible localhost -m` process
def test_checkpoint_facts_module(ckpt):  # noqa: F811
    (ckpt / "model-00002-of-00002.safetensors").unlink()
    res = run_module("checkpoint_facts", f"path={ckpt}", {}, system_path_without_nvidia_smi())
    f = res["ansible_facts"]["bwtune_checkpoint"]
    assert res["changed"] is False and f["complete"] is False
    assert f["shards"]["missing"] == ["model-00002-of-00002.safetensors"]
