"""A torch pin matches what torch reports in either spelling (issue 20, item 9)."""

from __future__ import annotations

import pytest

from ansible_collections.bwtune.sglang.plugins.filter.torch_version_matches import FilterModule
from ansible_collections.bwtune.sglang.plugins.module_utils._provision import stack_root as sl
from ansible_collections.bwtune.sglang.plugins.module_utils._provision import torch_pin


@pytest.mark.parametrize(
    ("reported", "pin", "matches"),
    [
        ("2.13.0+cu130", "2.13.0", True),  # PyPI: metadata 2.13.0, torch says +cu130
        ("2.13.0+cu130", "2.13.0+cu130", True),
        ("2.13.0", "2.13.0", True),
        ("2.11.0+cu130", "2.11.0+cu130", True),  # the H200's preinstalled torch
        ("2.12.0.dev20260307+cu130", "2.12.0.dev20260307+cu130", True),
        ("2.13.0+cpu", "2.13.0+cu130", False),  # another build
        ("2.13.0", "2.13.0+cu130", False),  # the pin names a build torch does not report
        ("2.13.1+cu130", "2.13.0", False),
        ("2.12.0.dev20260308+cu130", "2.12.0.dev20260307+cu130", False),
        (None, "2.13.0", False),
    ],
)
def test_either_spelling(reported: str | None, pin: str, matches: bool) -> None:
    assert torch_pin.version_matches(reported, pin) is matches
    assert FilterModule().filters()["torch_version_matches"](reported, pin) is matches


def test_activation_accepts_the_metadata_spelling_of_the_pin() -> None:
    inputs = {"torch_version": "2.13.0", "sglang_commit": "a" * 40, "python_version": "3.11"}
    facts = {
        "torch": {"version": "2.13.0+cu130", "cuda": "13.0"},
        "sglang": {"installed": True},
        "sgl_kernel": {"installed": True},
    }
    assert sl.facts_mismatches(inputs, facts) == []
    wrong = {**facts, "torch": {"version": "2.13.0+cpu"}}
    assert sl.facts_mismatches({**inputs, "torch_version": "2.13.0+cu130"}, wrong) == [
        "torch is 2.13.0+cpu, expected 2.13.0+cu130"
    ]
