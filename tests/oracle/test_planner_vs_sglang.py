"""The planner against real SGLang: where SGLang refuses a config, the planner prunes it with
a `kind: sglang` reason; where SGLang accepts it, no `sglang` reason; and the planner's
normalized flags are SGLang's own final values.

Every config of the example matrices, planned for every GPU (sm120, sm100, sm90) and every
release bwtune has a table for (tests/oracle/releases.py: 0.5.7 through 0.5.23), goes
through SGLang's own argument processing (parser, ServerArgs, resolution, check_server_args
as launch_server runs them, with the GPU simulated) by tests/oracle/sglang_oracle.py: one
oracle process per release for all its GPUs, each distinct argv asked once and evaluated
in-process (`evaluate_release`), two releases at a time (BWTUNE_ORACLE_WORKERS) while the
tests compare the answers already in. All 66 release x GPU pairs run by default;
BWTUNE_ORACLE_RELEASES=0.5.9,0.5.23 narrows them to those releases.

A choice the release's parser lacks (0.5.9 has no `marlin`) makes the matrix bad input; those
values are left out of the matrix and checked on their own: SGLang's argparse refuses them and
so does `rules.evaluate` (rule `argparse`, kind `sglang`).

Configs SGLang accepts at argument time but hardware rules prune are allowed only for the rules
in HARDWARE_ONLY, each with its source; the counts are printed (`pytest -s`).
"""

from __future__ import annotations

import copy
import functools
import json
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import matrix as matrix_mod
from ansible_collections.bwtune.sglang.plugins.module_utils._plan import planner
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import catalog, rules

# releases: every release, --no-deps, beside one shared environment; rules_evidence: the rule
# probes; sglang_oracle: H1's oracle, real SGLang's own argument processing
from tests.oracle import releases, rules_evidence, sglang_oracle

REPO = Path(__file__).resolve().parents[2]

# A clean machine builds the shared oracle venv and installs the releases first (minutes);
# then ~15-35 CPU-s per release for its three GPUs.
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
RULE_BY_ID = {r.id: r for r in rules.RULES}

# Rule probes where real releases and the rules disagree and no rule is fixed yet (measured
# 2026-11-30, every release x GPU; docs/sglang-rules-evidence.md lists each with SGLang's
# message). Their disagreements are recorded as `known`, not failures; the last test fails
# when a listed probe agrees everywhere (take it off the list).
PROBE_GAPS = {
    "nextn-extra_buffer-track-interval-small": "0.5.14-0.5.23 on sm100 assert mamba-track-interval >= "
    "draft tokens; no rule",
}
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


@functools.cache
def edge_cases(version: str) -> list[tuple[str, tuple[str, ...], dict[str, Any]]]:
    """The rule probes of tests/oracle/rules_evidence.py (edge cases for every rule, a few
    the examples never reach), as `version` spells them: (probe, argv, flags as written)."""
    table = catalog.get_table(version)
    mamba = (
        "mamba-radix-cache-strategy"
        if "mamba-radix-cache-strategy" in table.flags
        else "mamba-scheduler-strategy"
    )
    cases = []
    for probe, extra, _ in rules_evidence.PROBES:
        args = [f"--{mamba}" if a == "{mamba}" else a for a in extra]
        flags: dict[str, Any] = {"tp-size": "8"}
        for i, arg in enumerate(args):
            if arg.startswith("--"):
                value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True
                flags[arg[2:]] = value
        cases.append((probe, (*rules_evidence.BASE, *args), flags))
    return cases


def argvs_for(version: str, gpu: str) -> list[tuple[str, ...]]:
    """Every distinct argv to ask `version` on `gpu`: the planned configs, the lacking choices
    and the rule probes."""
    configs, lacking = planned(version, gpu)
    base = ["--model-path", str(MODEL), "--tp-size", "8"]
    argvs = [tuple(c.argv) for _, c in configs] + [(*base, f"--{f}", str(v)) for f, v in lacking]
    argvs += [argv for _, argv, _ in edge_cases(version)]
    return sorted(set(argvs))  # the examples share some launches


_POOL = ThreadPoolExecutor(max_workers=int(os.environ.get("BWTUNE_ORACLE_WORKERS", "2")))
_ASKED: dict[str, Future[dict[str, list[dict[str, Any]]]]] = {}


def ask(version: str, gpus: tuple[str, ...] = GPUS) -> Future[dict[str, list[dict[str, Any]]]]:
    """SGLang `version`'s answers for `gpus`, evaluated in the background (once per release)."""
    if version not in _ASKED:
        request = {g: argvs_for(version, g) for g in gpus}
        _ASKED[version] = _POOL.submit(sglang_oracle.evaluate_release, version, request)
    return _ASKED[version]


def attribute(
    per_rule: dict[str, dict[str, Any]],
    reasons: list[str],
    dormant: list[rules.Rule],
    flags: dict[str, Any],
    ctx: rules.Context,
    verdict: dict[str, Any],
) -> None:
    """Count SGLang's verdict on one config for the rule it is evidence about: each rule that
    prunes it, except where two `sglang` rules do (either could be what SGLang refused);
    and, when no `sglang` rule prunes it, each out-of-range `sglang` rule that would."""
    refusing = [r for r in reasons if r in RULE_BY_ID and RULE_BY_ID[r].kind == "sglang"]
    about = [r for r in reasons if r in RULE_BY_ID and (len(refusing) < 2 or r not in refusing)]
    if not refusing:
        about += [r.id for r in dormant if r.fn(dict(flags), ctx)]
    for rule_id in about:
        seen = per_rule.setdefault(rule_id, {"refuses": {}, "accepts": 0})
        if verdict["ok"]:
            seen["accepts"] += 1
        else:
            seen["refuses"][verdict["where"]] = seen["refuses"].get(verdict["where"], 0) + 1


def compare(version: str, gpu: str) -> tuple[list[str], dict[str, int]]:
    """Problems found, and counts: compared, refused by SGLang, pruned by hardware rules only."""
    configs, lacking = planned(version, gpu)
    table = catalog.get_table(version)
    base = ["--model-path", str(MODEL), "--tp-size", "8"]
    lacking_argvs = [[*base, f"--{flag}", str(value)] for flag, value in lacking]
    argvs = [c.argv for _, c in configs] + lacking_argvs
    answers = dict(zip(argvs_for(version, gpu), ask(version).result()[gpu], strict=True))
    verdicts = [answers[tuple(argv)] for argv in argvs]
    problems: list[str] = []
    counts = {"compared": len(configs), "sglang_refuses": 0, "hardware_only": 0, "valid": 0, "lacking": 0}
    # What SGLang did with the configs each rule prunes, and with the configs an `sglang` rule
    # would refuse if its version range took this release in (evidence for the range).
    per_rule: dict[str, dict[str, Any]] = {}
    matrix = matrix_mod.parse(matrix_for(EXAMPLES[0], version)[0], catalog.get_table, gpu=gpu)
    ctx = rules.Context(gpu, version, table, planner.model_info(matrix, None))
    dormant = [r for r in rules.RULES if r.kind == "sglang" and not r.applies(version, gpu) and gpu in r.gpus]
    for (example, config), verdict in zip(configs, verdicts, strict=False):
        where = f"{example} {config.point}"
        kinds = {r.kind for r in config.reasons}
        attribute(per_rule, [r.rule for r in config.reasons], dormant, config.flags, ctx, verdict)
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
    known: list[str] = []
    for probe, argv, flags in edge_cases(version):
        verdict = answers[argv]
        found = known if probe in PROBE_GAPS else problems
        ours = rules.evaluate(flags, gpu, version, ctx.model)
        counts["edge_cases"] = counts.get("edge_cases", 0) + 1
        attribute(per_rule, [x.rule for x in ours.reasons], dormant, ours.flags, ctx, verdict)
        refusing = [f"{x.rule}: {x.message}" for x in ours.reasons if x.kind == "sglang"]
        if verdict["ok"] and refusing:
            found.append(f"probe {probe}: SGLang accepts it but the rules refuse it: {refusing}")
        elif not verdict["ok"] and not refusing:
            found.append(
                f"probe {probe}: SGLang refuses ({verdict['error_type']}: {verdict['error']} @ "
                f"{verdict['where']}) but the plan says valid {[x.rule for x in ours.reasons]}"
            )
        elif verdict["ok"]:
            values = verdict["values"]
            for flag in sorted(set(NORMALIZED) & set(values) & set(table.flags) & set(ours.flags)):
                if values[flag] != ours.flags[flag]:  # the adjust rules' final values
                    found.append(
                        f"probe {probe}: {flag} is {values[flag]!r} in SGLang, "
                        f"{ours.flags[flag]!r} by the rules"
                    )
    FINDINGS[f"{version} {gpu}"] = {"counts": counts, "problems": problems, "known": known, "rules": per_rule}
    return problems, counts


# Every pair compared in this session, for tests/oracle/release_evidence.py: written to the
# file BWTUNE_ORACLE_RESULTS names (merged into what it holds) at the end of the module.
FINDINGS: dict[str, dict[str, Any]] = {}


def _write_findings() -> None:
    path = os.environ.get("BWTUNE_ORACLE_RESULTS")
    if not path or not FINDINGS:
        return
    target = Path(path)
    merged = json.loads(target.read_text()) if target.exists() else {}
    merged.update(FINDINGS)
    order = {v: i for i, v in enumerate(VERSIONS)}
    ordered = sorted(merged.items(), key=lambda kv: (order.get(kv[0].split()[0], -1), kv[0]))
    target.write_text(json.dumps(dict(ordered), indent=1, sort_keys=True) + "\n")


def _cases() -> list[tuple[str, str]]:
    """(release, GPU) pairs to check: every release on every GPU (in-process evaluation: a few
    minutes on a 2-core machine); BWTUNE_ORACLE_RELEASES, a comma-separated list of releases,
    narrows it to those ("all": every release)."""
    wanted = os.environ.get("BWTUNE_ORACLE_RELEASES", "all")
    versions = VERSIONS if wanted == "all" else tuple(v.strip() for v in wanted.split(",") if v.strip())
    unknown = [v for v in versions if v not in VERSIONS]
    if unknown:
        raise ValueError(
            f"BWTUNE_ORACLE_RELEASES: {unknown} are not releases bwtune has tables for {VERSIONS}"
        )
    return [(v, g) for v in versions for g in GPUS]


@pytest.fixture(scope="module", autouse=True)
def _ask_every_release_first(request: pytest.FixtureRequest) -> Iterator[None]:
    """Start SGLang on every selected release up front, so that two releases are evaluated at
    a time while the tests compare what has come back; cancel what is left at the end."""
    needed: dict[str, list[str]] = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if getattr(item, "originalname", "") == "test_planner_agrees_with_sglang" and callspec:
            needed.setdefault(callspec.params["version"], []).append(callspec.params["gpu"])
    for version, gpus in needed.items():
        ask(version, tuple(g for g in GPUS if g in gpus))
    yield
    _POOL.shutdown(wait=True, cancel_futures=True)
    _write_findings()


@pytest.mark.parametrize(("version", "gpu"), _cases())
def test_planner_agrees_with_sglang(version: str, gpu: str, request: pytest.FixtureRequest) -> None:
    if (version, gpu) in UNRECONCILED:
        request.applymarker(pytest.mark.xfail(reason=UNRECONCILED[version, gpu], strict=True))
    problems, counts = compare(version, gpu)
    print(f"\nsglang {version} on {gpu}: {counts}")
    assert counts["compared"] > 30 and counts["sglang_refuses"] + counts["hardware_only"] > 0
    assert not problems, f"{len(problems)} disagreements:\n" + "\n".join(problems[:25])


def test_every_listed_probe_gap_still_disagrees_somewhere() -> None:
    ran = {key.split()[0] for key in FINDINGS}
    if ran != set(VERSIONS):
        pytest.skip("only a full run (every release) can say a gap is gone")
    seen = {p.split(":")[0].removeprefix("probe ") for f in FINDINGS.values() for p in f["known"]}
    assert set(PROBE_GAPS) <= seen, f"these probes agree on every release now: {set(PROBE_GAPS) - seen}"


def test_every_hardware_rule_is_listed_with_a_source() -> None:
    hardware = {r.id for r in rules.RULES if r.kind == "hardware"}
    assert hardware == set(HARDWARE_ONLY)
    assert all(HARDWARE_ONLY.values())
