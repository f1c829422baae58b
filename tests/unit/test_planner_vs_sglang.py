"""The planner against real SGLang: where SGLang refuses a config, the planner prunes it, and
the planner's normalized flags are SGLang's own final values.

Every config of the example matrices is run through SGLang's argument processing (ServerArgs
from the argv, as launch_server does) with the GPU simulated, by tests/oracle/sglang_oracle.py,
for 0.5.23 and for the March-2026 release. Configs SGLang accepts at argument time but our
hardware rules prune are allowed only for the rules listed in HARDWARE_ONLY, with their source.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils import catalog, planner, rules

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "oracle"))
import sglang_oracle  # noqa: E402  (H1's oracle: real SGLang in its own venv)

pytestmark = pytest.mark.oracle

MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
EXAMPLES = ["qwen35-397b-nvfp4-sm120.yml", "qwen35-397b-nvfp4-sm100.yml", "demo.yml"]
VERSIONS = ["0.5.23", "0.5.9"]

# Rules that prune configs SGLang's argument processing accepts: the failure comes at model
# load or the first forward on that GPU, which no CPU run can show. Each with its source.
HARDWARE_ONLY = {
    "sm100-only-moe-runner": "FlashInfer 0.7.2: trtllm-gen / CuTe DSL MoE kernels are SM100-family only",
    "sm100-only-fp4-gemm": "FlashInfer 0.7.2: trtllm / CuTe DSL FP4 GEMM are SM100-family only",
    "sm120-moe-auto-without-quantization": "sglang PR #26496, open PR #39807",
    "nvfp4-moe-cutlass-triton": "sglang 0.5.23 layers/quantization/modelopt_quant.py",
    "hopper-nvfp4-marlin-only": "sglang layers/quantization/modelopt_quant.py (Marlin below SM100)",
    "fa3-hopper-only": "sglang layers/attention/attention_registry.py",
    "hybrid-blackwell-attention": "sglang 0.5.23 layers/attention/attention_registry.py",
    "trtllm-mha-prefill-sm100-only": "FlashInfer 0.7.2: trtllm-gen prefill kernels are SM100-only",
}


def matrix_for(name: str, version: str) -> dict[str, Any]:
    """The example, pointed at the fixture checkpoint, with flags spelled as `version` does."""
    matrix = copy.deepcopy(yaml.safe_load((REPO / "examples" / name).read_text()))
    matrix["model"]["path"] = str(MODEL)
    matrix["sglang"]["version"] = version
    table = catalog.get_table(version)

    def respell(flags: dict[str, Any]) -> dict[str, Any]:
        return {(k if table.lookup(k) else table.successor(k) or k): v for k, v in flags.items()}

    matrix["base"] = respell(matrix.get("base") or {})
    matrix["axes"] = respell(matrix["axes"])
    for axis, bundles in (matrix.get("bundles") or {}).items():
        matrix["bundles"][axis] = {n: respell(b or {}) for n, b in bundles.items()}
    return matrix


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_planner_agrees_with_sglang(example: str, version: str) -> None:
    matrix = matrix_for(example, version)
    result = planner.plan(matrix)
    verdicts = sglang_oracle.evaluate(version, result.gpu, [c.argv for c in result.configs])
    assert len(verdicts) == len(result.configs)
    table = catalog.get_table(version)
    # Flags the adjust rules set, compared even where the plan leaves them at the default.
    normalizes = {"speculative-algorithm", "speculative-num-draft-tokens", "moe-runner-backend"}
    problems = []
    for config, verdict in zip(result.configs, verdicts, strict=True):
        kinds = {r.kind for r in config.reasons}
        if not verdict["ok"]:
            if config.status != planner.PRUNED:
                problems.append(
                    f"{config.point}: SGLang refuses ({verdict['error']}) but the plan says {config.status}"
                )
            continue
        if "sglang" in kinds:
            problems.append(f"{config.point}: SGLang accepts it but the plan says {config.reasons}")
        for reason in config.reasons:
            if reason.rule not in HARDWARE_ONLY:
                problems.append(
                    f"{config.point}: {reason.rule} prunes what SGLang accepts; list it with its source"
                )
        values = verdict["values"]
        for flag in sorted((set(config.flags) | normalizes) & set(values) & set(table.flags)):
            ours = config.flags.get(flag, table.flags[flag].default)
            if values[flag] != ours:
                problems.append(f"{config.point}: {flag} is {values[flag]!r} in SGLang, {ours!r} in the plan")
    assert not problems, "\n".join(problems[:20])


def test_every_hardware_rule_is_listed_with_a_source() -> None:
    hardware = {r.id for r in rules.RULES if r.kind == "hardware"}
    assert hardware == set(HARDWARE_ONLY)
    assert all(HARDWARE_ONLY.values())
