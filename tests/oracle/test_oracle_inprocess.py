"""The oracle's in-process evaluation (many configs in one process, SGLang's state put back
between them) gives the verdicts of the forked one (a fresh child per config): the
differential suite relies on it to check every release on every GPU within CI's budget."""

from __future__ import annotations

from typing import Any

import pytest

from tests.oracle import rules_evidence, sglang_oracle  # rules_evidence: every rule's edge cases

pytestmark = [pytest.mark.oracle, pytest.mark.slow, pytest.mark.timeout(1200)]


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    values = {k: v for k, v in result["values"].items() if k != "random-seed"}  # drawn afresh
    return {**result, "values": values}


# A release before the staged ServerArgs (0.5.9, __post_init__ does the work) and the
# newest (resolution pipeline), each on a GPU where many probes are refused.
@pytest.mark.parametrize(("version", "gpu"), [("0.5.9", "sm90"), ("0.5.23", "sm120")])
def test_in_process_verdicts_equal_forked_ones(version: str, gpu: str) -> None:
    mamba = "--mamba-scheduler-strategy" if version == "0.5.9" else "--mamba-radix-cache-strategy"
    argvs = [
        [*rules_evidence.BASE, *(mamba if a == "{mamba}" else a for a in extra)]
        for _, extra, _ in rules_evidence.PROBES
    ]
    forked = sglang_oracle.evaluate(version, gpu, argvs)
    in_process = sglang_oracle.evaluate_release(version, {gpu: argvs})[gpu]
    assert any(r["ok"] for r in forked) and any(not r["ok"] for r in forked)
    differing = [
        (" ".join(argv[4:]), f["error"], i["error"])
        for argv, f, i in zip(argvs, forked, in_process, strict=True)
        if _comparable(f) != _comparable(i)
    ]
    assert not differing, differing
