"""The stand-in's recorded SGLang verdicts (sglang_verdicts.json) are fresh: they cover every
flag set the examples, probes and tests launch (fast), and real SGLang still says what they
say (oracle tier: re-asks every refusal and a sample of acceptances)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from bwtune.standin import verdicts

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "gen_standin_verdicts.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_standin_verdicts", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # plans every matrix and its neighbours for each profile: ~1 min of CPU
def test_every_flag_set_the_examples_and_tests_launch_has_a_recorded_verdict():
    recorded = json.loads(verdicts.DATA.read_text())["sglang"]
    for (version, gpu), by_key in generator().argvs_by_table().items():
        assert set(by_key) == set(recorded[version][gpu]), f"{version}/{gpu}: run {SCRIPT.name}"
