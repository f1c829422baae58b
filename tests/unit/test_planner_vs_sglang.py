"""The planner against real SGLang: where SGLang refuses a config, the planner prunes it with
a `kind: sglang` reason; where SGLang accepts it, no `sglang` reason; and the planner's
normalized flags are SGLang's own final values.

Every config of the example matrices, planned for every GPU (sm120, sm100, sm90) and every
release bwtune has a table for (tests/oracle/releases.py: 0.5.7 through 0.5.23), goes
through SGLang's own argument processing (parser, ServerArgs, resolution, check_server_args
as launch_server runs them, with the GPU simulated) by tests/oracle/sglang_oracle.py: one
oracle call per release x GPU, each distinct argv asked once.

A choice the release's parser lacks (0.5.9 has no `marlin`) makes the matrix bad input; those
values are left out of the matrix and checked on their own: SGLang's argparse refuses them and
so does `rules.evaluate` (rule `argparse`, kind `sglang`).

Configs SGLang accepts at argument time but hardware rules prune are allowed only for the rules
in HARDWARE_ONLY, each with its source; the counts are printed (`pytest -s`).
"""

from __future__ import annotations

import copy
import functools
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils import catalog, planner, rules

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "oracle"))
import releases  # noqa: E402  (every release, --no-deps, beside one shared environment)
import sglang_oracle  # noqa: E402  (H1's oracle: real SGLang's own argument processing)

# A clean machine builds both oracle venvs first (~7 minutes); afterwards ~1-2 minutes.
pytestmark = [pytest.mark.oracle, pytest.mark.timeout(2400)]

MODEL = sglang_oracle.QWEN35_NVFP4
EXAMPLES = ("qwen35-397b-nvfp4-sm120.yml", "qwen35-397b-nvfp4-sm100.yml", "demo.yml")
VERSIONS = tuple(releases.RELEASES)
# Releases whose real argument processing still disagrees with the rules somewhere, with
# what disagrees (measured; docs/sglang-rules-evidence.md "Every release"). Strict xfail: a
# release that starts agreeing fails until it is taken off this list.
UNRECONCILED: dict[tuple[str, str], str] = {}
GPUS = sglang_oracle.GPUS

# Rules that prune configs SGLang's argument processing accepts: the failure comes at model
# load or the first forward on that GPU, which no CPU run can show. Each with its source.
HARDWARE_ONLY = {
    "sm100-only-moe-runner": "FlashInfer 0.7.2: trtllm-gen / CuTe DSL MoE kernels are SM100-family only",
    "sm100-only-fp4-gemm": "FlashInfer 0.7.2: trtllm / CuTe DSL FP4 GEMM are SM100-family only",
    "fp4-moe-auto-trtllm-at-load": "sglang PR #26496, open PR #39807: FP4 MoE auto is trtllm-gen at load",
    "nvfp4-moe-cutlass-triton": "sglang 0.5.23 layers/quantization/modelopt_quant.py",
    "hopper-nvfp4-marlin-only": "sglang layers/quantization/modelopt_quant.py (Marlin below SM100)",
    "fa3-hopper-only": "sglang layers/attention/attention_registry.py",
    "hybrid-blackwell-attention": "sglang 0.5.23 layers/attention/attention_registry.py",
}

# Flags the adjust rules set, compared even where the plan leaves them at the default.
NORMALIZED = (
    "speculative-algorithm",
    "speculative-num-draft-tokens",
    "moe-runner-backend",
    "speculative-moe-runner-backend",
    "mamba-radix-cache-strategy",
    "mamba-scheduler-strategy",
    "disable-radix-cache",
)
# Drawn afresh by SGLang on every evaluation that leaves it unset.
UNSTABLE = frozenset({"random-seed"})


def matrix_for(name: str, version: str) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """The example, pointed at the fixture checkpoint, flags spelled as `version` does, and
    without the choices `version` lacks (returned apart as (flag, value))."""
    matrix = copy.deepcopy(yaml.safe_load((REPO / "examples" / name).read_text()))
    matrix["model"]["path"] = str(MODEL)
    matrix["sglang"]["version"] = version
    table = catalog.get_table(version)
    lacking: list[tuple[str, Any]] = []

    def respell(flags: dict[str, Any]) -> dict[str, Any]:
        return {(k if table.lookup(k) else table.successor(k) or k): v for k, v in flags.items()}

    def known(flags: dict[str, Any]) -> dict[str, Any]:  # older releases lack some flags
        bundled = matrix.get("bundles") or {}
        return {k: v for k, v in respell(flags).items() if table.lookup(k) or k in bundled}

    matrix["base"] = known(matrix.get("base") or {})
    matrix["axes"] = known(matrix["axes"])
    for axis, values in matrix["axes"].items():
        spec = table.lookup(axis)
        if spec is not None and spec.choices:
            lacking += [(axis, v) for v in values if v not in spec.choices]
            matrix["axes"][axis] = [v for v in values if v in spec.choices]
    for axis, bundles in (matrix.get("bundles") or {}).items():
        matrix["bundles"][axis] = {n: known(b or {}) for n, b in bundles.items()}
    matrix["exclude"] = [
        e
        for e in matrix.get("exclude") or []
        if all(a in matrix["axes"] and v in matrix["axes"][a] for a, v in e.items())
    ]
    return matrix, lacking


@functools.cache
def planned(version: str, gpu: str) -> tuple[list[tuple[str, planner.Config]], list[tuple[str, Any]]]:
    """Every config of every example for `version` on `gpu`, and the choices the release lacks."""
    configs: list[tuple[str, planner.Config]] = []
    lacking: list[tuple[str, Any]] = []
    for name in EXAMPLES:
        matrix, missing = matrix_for(name, version)
        configs += [(name, c) for c in planner.plan(matrix, gpu=gpu).configs]
        lacking += [m for m in missing if m not in lacking]
    return configs, lacking


def rules_of(config: planner.Config) -> list[str]:
    return [f"{r.rule} ({r.kind}): {r.message}" for r in config.reasons]


def compare(version: str, gpu: str) -> tuple[list[str], dict[str, int]]:
    """Problems found, and counts: compared, refused by SGLang, pruned by hardware rules only."""
    configs, lacking = planned(version, gpu)
    table = catalog.get_table(version)
    base = ["--model-path", str(MODEL), "--tp-size", "8"]
    lacking_argvs = [[*base, f"--{flag}", str(value)] for flag, value in lacking]
    argvs = [c.argv for _, c in configs] + lacking_argvs
    unique = sorted({tuple(argv) for argv in argvs})  # the examples share some launches
    answers = dict(zip(unique, sglang_oracle.evaluate(version, gpu, unique), strict=True))
    verdicts = [answers[tuple(argv)] for argv in argvs]
    problems: list[str] = []
    counts = {"compared": len(configs), "sglang_refuses": 0, "hardware_only": 0, "valid": 0, "lacking": 0}
    for (example, config), verdict in zip(configs, verdicts, strict=False):
        where = f"{example} {config.point}"
        kinds = {r.kind for r in config.reasons}
        if not verdict["ok"]:
            counts["sglang_refuses"] += 1
            if "sglang" not in kinds:
                problems.append(
                    f"{where}: SGLang refuses ({verdict['error_type']}: {verdict['error']} @ "
                    f"{verdict['where']}) but the plan says {config.status} {rules_of(config)}"
                )
            continue
        if "sglang" in kinds:
            problems.append(f"{where}: SGLang accepts it but the plan prunes it: {rules_of(config)}")
        unlisted = [r.rule for r in config.reasons if r.rule not in HARDWARE_ONLY]
        if unlisted:
            problems.append(f"{where}: {unlisted} prune what SGLang accepts; list them with their source")
        if config.reasons:
            counts["hardware_only"] += 1
        else:
            counts["valid"] += config.status != planner.DUPLICATE
        values = verdict["values"]
        compared = set(config.flags) | set(NORMALIZED)
        if "speculative-algorithm" not in config.flags:
            compared.discard("speculative-moe-runner-backend")  # filled in, unused, without a draft
        if "mamba-radix-cache-strategy" in table.flags:  # 0.5.14-0.5.19 also keep the old name
            compared.discard("mamba-scheduler-strategy")
        for flag in sorted(compared & set(values) & set(table.flags) - UNSTABLE):
            ours = config.flags.get(flag, table.flags[flag].default)
            if values[flag] != ours:
                problems.append(f"{where}: {flag} is {values[flag]!r} in SGLang, {ours!r} in the plan")
    for (flag, value), verdict in zip(lacking, verdicts[len(configs) :], strict=True):
        counts["lacking"] += 1
        ours = rules.evaluate({flag: value}, gpu, version).reasons
        if verdict["error_type"] != "ArgumentError" or [r.rule for r in ours] != ["argparse"]:
            problems.append(f"--{flag} {value}: SGLang says {verdict['error']!r}, the planner {ours}")
    return problems, counts


def _cases() -> list[tuple[str, str]]:
    """(release, GPU) pairs to check. By default (the CI budget: each pair costs ~45 CPU-s on
    a 2-core machine) every GPU for 0.5.9 and the newest release, and on sm120 the releases on
    either side of every measured behaviour change; BWTUNE_ORACLE_RELEASES=all checks every
    release on every GPU, a comma-separated list checks those releases on every GPU."""
    wanted = os.environ.get("BWTUNE_ORACLE_RELEASES", "")
    if wanted == "all":
        return [(v, g) for v in VERSIONS for g in GPUS]
    if wanted:
        return [(v.strip(), g) for v in wanted.split(",") for g in GPUS]
    cases = [(v, g) for v in ("0.5.9", VERSIONS[-1]) for g in GPUS]
    return cases + [(v, "sm120") for v in BOUNDARIES if (v, "sm120") not in cases]


# Each release where a rule's range starts or ends (rules.py *_SINCE, qwen35-needs-0.5.9) and
# the release before it.
BOUNDARIES = (
    "0.5.8.post1",
    "0.5.11",
    "0.5.12",
    "0.5.12.post1",
    "0.5.13",
    "0.5.13.post1",
    "0.5.14",
    "0.5.18",
    "0.5.19",
)


@pytest.mark.parametrize(("version", "gpu"), _cases())
def test_planner_agrees_with_sglang(version: str, gpu: str, request: pytest.FixtureRequest) -> None:
    if (version, gpu) in UNRECONCILED:
        request.applymarker(pytest.mark.xfail(reason=UNRECONCILED[version, gpu], strict=True))
    problems, counts = compare(version, gpu)
    print(f"\nsglang {version} on {gpu}: {counts}")
    assert counts["compared"] > 30 and counts["sglang_refuses"] + counts["hardware_only"] > 0
    assert not problems, f"{len(problems)} disagreements:\n" + "\n".join(problems[:25])


def test_every_hardware_rule_is_listed_with_a_source() -> None:
    hardware = {r.id for r in rules.RULES if r.kind == "hardware"}
    assert hardware == set(HARDWARE_ONLY)
    assert all(HARDWARE_ONLY.values())
