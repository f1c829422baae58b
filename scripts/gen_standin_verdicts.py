#!/usr/bin/env python3
"""Record real SGLang's verdicts on the stand-in's flag sets: src/bwtune/standin/sglang_verdicts.json.

    .venv/bin/python scripts/gen_standin_verdicts.py          # (re)write the file
    .venv/bin/python scripts/gen_standin_verdicts.py --update # ask only about new flag sets
    .venv/bin/python scripts/gen_standin_verdicts.py --check  # exit 1 when it is stale
                                                              # (re-asks a sample; --sample N)

For every shipped stand-in profile (its SGLang release and GPU) it asks the oracle (real
SGLang in its own venv, GPU simulated: tests/oracle/sglang_oracle.py) about: every config
the matrices of examples/ and tests/ plan (valid or pruned) and their neighbours (each axis
alone on the base with every choice its flag has; each config with other tp/ep/dp sizes),
each choice of the backend flags a sweep varies, the speculative settings, and the flag sets
the stand-in's own tests launch, on the fixture checkpoint. The stand-in looks a verdict up by the
flags given (bwtune.standin.verdicts.key_of). Building an oracle venv takes minutes once.
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import json
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere: the repo's `tests` package
    sys.path.insert(0, str(REPO))
from ansible_collections.bwtune.sglang.plugins.module_utils._plan import planner  # noqa: E402
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import catalog  # noqa: E402
from bwtune.standin import verdicts  # noqa: E402
from bwtune.standin.args import flag_table, parse  # noqa: E402
from bwtune.standin.profile import load_profile  # noqa: E402
from tests.oracle import sglang_oracle  # noqa: E402  (real SGLang as the oracle)

MODEL = str(sglang_oracle.QWEN35_NVFP4)
PROFILES = sorted(p.stem for p in (REPO / "src" / "bwtune" / "standin" / "profiles").glob("*.yml"))
BASE = ["--model-path", MODEL, "--tp-size", "8", "--quantization", "modelopt_fp4"]
PROBED = ("moe-runner-backend", "fp4-gemm-backend", "attention-backend", "speculative-moe-runner-backend")
SPECULATIVE = (
    ["--speculative-algorithm", "NEXTN"],
    ["--speculative-algorithm", "EAGLE"],
    ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
     "--speculative-num-draft-tokens", "4"],
    ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2", "--speculative-eagle-topk", "2",
     "--speculative-num-draft-tokens", "4"],
)  # fmt: skip
CORE = {"moe-runner-backend": "flashinfer_cutlass", "fp4-gemm-backend": "flashinfer_cudnn"}


# Every matrix bwtune ships or tests with: its configs, and their neighbours, get verdicts.
MATRICES = sorted(
    [*(REPO / "examples").glob("*.yml"), *(REPO / "tests").rglob("matrix*.yml")],
    key=lambda p: str(p.relative_to(REPO)),
)
# Parallelism a launch may be given beside any config (SGLang checks tp/ep/dp together).
PARALLEL = {"tp-size": ("1", "2", "4", "8"), "ep-size": ("1", "2", "4", "8"), "dp-size": ("1", "2")}


def _matrix_for(path: Path, version: str) -> dict[str, Any] | None:
    """The matrix in `path` for this release (flags spelled as it does, choices it has)."""
    table = catalog.get_table(version)
    matrix = copy.deepcopy(yaml.safe_load(path.read_text()))
    if not isinstance(matrix, dict) or "model" not in matrix or "axes" not in matrix:
        return None
    matrix["model"]["path"] = MODEL
    matrix.setdefault("sglang", {})["version"] = version
    for key in ("base", "axes"):
        matrix[key] = {
            (k if table.lookup(k) else table.successor(k) or k): v for k, v in (matrix.get(key) or {}).items()
        }
    for axis, values in list(matrix["axes"].items()):
        spec = table.lookup(axis)
        if spec is not None and spec.choices:
            matrix["axes"][axis] = [v for v in values if v in spec.choices]
    return matrix


def _planned(matrix: dict[str, Any], gpu: str, name: str) -> list[list[str]]:
    try:
        return [c.argv for c in planner.plan(matrix, gpu=gpu).configs if c.status != "duplicate"]
    except Exception as exc:  # a matrix for another release: say so, keep going
        print(f"skipped {name} for {matrix['sglang']['version']}/{gpu}: {exc}", file=sys.stderr)
        return []


def _with(argv: list[str], flag: str, value: str) -> list[str]:
    """argv with --flag set to value (replacing what it had)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == f"--{flag}":
            skip = True
        else:
            out.append(word)
    return [*out, f"--{flag}", value]


def example_argvs(version: str, gpu: str) -> list[list[str]]:
    """Every config (valid or pruned) the matrices of examples/ and tests/ plan for this release
    and GPU, and their neighbours: each axis alone on the base (every choice the flag has, as
    a cut-down matrix launches it), and each config with other parallelism (PARALLEL)."""
    table = catalog.get_table(version)
    out: list[list[str]] = []
    for path in MATRICES:
        matrix = _matrix_for(path, version)
        if matrix is None:
            continue
        planned = _planned(matrix, gpu, path.name)
        out += planned
        for axis, values in matrix["axes"].items():
            spec = table.lookup(axis)
            choices = list(spec.choices) if spec is not None and spec.choices else list(values)
            alone = {**copy.deepcopy(matrix), "axes": {axis: choices}, "exclude": []}
            alone["bundles"] = {k: v for k, v in (matrix.get("bundles") or {}).items() if k == axis}
            out += _planned(alone, gpu, f"{path.name} ({axis} alone)")
            # the matrix's own values alone on the base, at other parallelism too
            planned += _planned({**alone, "axes": {axis: list(values)}}, gpu, f"{path.name} ({axis})")
        for argv in planned:
            for flag, values in PARALLEL.items():
                out += [_with(argv, flag, v) for v in values if table.lookup(flag)]
    return out


# The flag sets the stand-in's own tests launch with (tests/unit/standin/): those tests then
# run against real SGLang's verdicts too.
TEST_FLAGS = (
    ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass", "--tp-size", "8"],
    ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass",
     "--fp4-gemm-backend", "flashinfer_cudnn", "--tp-size", "8"],
    ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass", "--tp-size", "8",
     "--attention-backend", "trtllm_mha", "--kv-cache-dtype", "fp8_e4m3"],
    ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass", "--tp-size", "8",
     "--mem-fraction-static", "0.95"],
    ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_trtllm"],
    ["--quantization", "modelopt_fp4", "--tp-size", "2"],
    ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass",
     "--fp4-gemm-backend", "flashinfer_cudnn", "--tp-size", "8",
     "--speculative-algorithm", "NEXTN", "--mamba-radix-cache-strategy", "extra_buffer"],
    # rows tests/integration/sweep adds to its matrix in code (test_gate_under_load.py,
    # test_search_remeasure_node.py)
    ["--quantization", "modelopt_fp4", "--tp-size", "8", "--cuda-graph-max-bs-decode", "104"],
    ["--quantization", "modelopt_fp4", "--tp-size", "8", "--moe-runner-backend", "flashinfer_cutlass",
     "--cuda-graph-max-bs-decode", "17"],
    # the config tests/hosts/test_promote.py rolls out to the hosts' stand-in servers
    ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass", "--tp-size", "8",
     "--max-running-requests", "32"],
)  # fmt: skip


def probe_argvs(version: str) -> list[list[str]]:
    """Each choice of the backend flags a sweep varies, and the speculative settings."""
    flags = flag_table(version)

    def argv(chosen: dict[str, str]) -> list[str]:
        return BASE + [w for k, v in chosen.items() for w in (f"--{k}", v)]

    out = [argv(CORE)]
    for flag in PROBED:
        for choice in flags.get(flag, {}).get("choices") or []:
            out.append(argv({**CORE, flag: str(choice)}))
    out += [argv(CORE) + spec for spec in SPECULATIVE]
    out += [BASE + spec for spec in SPECULATIVE]
    out += [["--model-path", MODEL, *flags] for flags in TEST_FLAGS]
    return out


@functools.cache
def enclosing_function(version: str, where: str) -> str | None:
    """The function around sglang/...py:LINE in the oracle venv's copy of SGLang."""
    path, _, line = where.rpartition(":")
    site = sglang_oracle.oracle_python(version).parent.parent / "lib"
    files = list(site.glob(f"python3*/site-packages/{path}"))
    if not files or not line.isdigit():
        return None
    best: tuple[int, str] | None = None
    for node in ast.walk(ast.parse(files[0].read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = node.end_lineno or node.lineno
            if node.lineno <= int(line) <= end and (best is None or node.lineno > best[0]):
                best = (node.lineno, node.name)
    return best[1] if best else None


def record(version: str, verdict: dict[str, Any], explicit: dict[str, Any]) -> dict[str, Any]:
    """What the file keeps of a verdict: the resolved values that differ from the flags given
    (verdicts.lookup puts the given ones back)."""
    where = verdict.get("where")
    values = verdict.get("values") or {}
    given = {f: verdicts._canonical(v) for f, v in explicit.items()}
    return {
        "ok": bool(verdict["ok"]),
        "error_type": verdict.get("error_type") or "",
        "error": verdict.get("error") or "",
        "where": where,
        "function": enclosing_function(version, where) if where else None,
        "statement": verdict.get("statement"),
        "resolved": {
            f: values[f]
            for f in verdicts.RESOLVED
            if f in values and (f not in given or given[f] != values[f])
        },
    }


def argvs_by_table() -> dict[tuple[str, str], dict[str, list[str]]]:
    """{(release, gpu): {verdict key: argv}} for every shipped profile (no oracle needed)."""
    out: dict[tuple[str, str], dict[str, list[str]]] = {}
    for name in PROFILES:
        profile = load_profile(name)
        version, gpu = profile.sglang_version, profile.gpu.arch
        flags = flag_table(version)
        argvs = sorted({tuple(a) for a in example_argvs(version, gpu) + probe_argvs(version)})
        table = out.setdefault((version, gpu), {})
        for argv in argvs:
            table.setdefault(verdicts.key_of(parse(list(argv), flags).explicit), list(argv))
    return out


def _ask(by_table: dict[tuple[str, str], list[list[str]]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Real SGLang's verdicts, one in-process evaluator per release (all its GPUs at once)."""
    answers: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for version in sorted({v for v, _ in by_table}):
        gpus = {g: argvs for (v, g), argvs in by_table.items() if v == version}
        for gpu, got in sglang_oracle.evaluate_release(version, gpus).items():
            answers[(version, gpu)] = got
    return answers


def generate(update: bool = False) -> dict[str, Any]:
    """Every verdict afresh; with `update`, only those of flag sets not yet recorded (the
    recorded ones kept, those no longer launched dropped: `--check` re-asks a sample)."""
    data: dict[str, Any] = {"schema": 2, "generated_by": "scripts/gen_standin_verdicts.py"}
    current = json.loads(verdicts.DATA.read_text()) if update and verdicts.DATA.exists() else {}
    kept = current.get("sglang", {}) if current.get("schema") == 2 else {}
    tables = argvs_by_table()
    have = {t: kept.get(t[0], {}).get(t[1], {}) for t in tables}
    keys = {t: sorted(k for k in by_key if k not in have[t]) for t, by_key in tables.items()}
    answers = _ask({t: [tables[t][k] for k in keys[t]] for t in tables if keys[t]})
    records: list[str] = []  # one JSON text per distinct record; tables point into it
    index: dict[str, int] = {}
    sglang: dict[str, Any] = {}

    def put(table: dict[str, int], key: str, rec: dict[str, Any]) -> None:
        text = json.dumps(rec, sort_keys=True)
        table[key] = index.setdefault(text, len(records))
        if table[key] == len(records):
            records.append(text)

    for (version, gpu), by_key in tables.items():
        flags = flag_table(version)
        table = sglang.setdefault(version, {}).setdefault(gpu, {})
        for key in sorted(set(by_key) & set(have[(version, gpu)])):
            put(table, key, current["records"][have[(version, gpu)][key]])
        for key, verdict in zip(keys[(version, gpu)], answers.get((version, gpu), []), strict=True):
            put(table, key, record(version, verdict, parse(list(by_key[key]), flags).explicit))
        sglang[version][gpu] = dict(sorted(table.items()))
    data["records"] = [json.loads(t) for t in records]
    data["sglang"] = sglang
    return data


def dump(data: dict[str, Any]) -> str:
    """One record or table entry a line: reviewable diffs, a file of modest size."""
    lines = ["{", f' "generated_by": {json.dumps(data["generated_by"])},', f' "schema": {data["schema"]},']
    lines.append(' "records": [')
    lines.append(",\n".join("  " + json.dumps(r, sort_keys=True) for r in data["records"]))
    lines.append(" ],")
    lines.append(' "sglang": {')
    versions = []
    for version, gpus in sorted(data["sglang"].items()):
        tables = []
        for gpu, table in sorted(gpus.items()):
            rows = ",\n".join(f"    {json.dumps(k)}: {i}" for k, i in sorted(table.items()))
            tables.append(f"   {json.dumps(gpu)}: {{\n{rows}\n   }}")
        versions.append(f"  {json.dumps(version)}: {{\n" + ",\n".join(tables) + "\n  }")
    lines.append(",\n".join(versions))
    lines.append(" }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def check(sample: int) -> list[str]:
    """Why the file is stale, if it is: the flag sets it covers must be exactly those the
    examples, probes and tests launch (no oracle needed), and real SGLang must still give
    every recorded refusal and a spread sample of `sample` acceptances per table."""
    current = json.loads(verdicts.DATA.read_text()) if verdicts.DATA.exists() else {}
    problems: list[str] = []
    asked: dict[tuple[str, str], list[list[str]]] = {}
    chosen: dict[tuple[str, str], list[str]] = {}
    tables = argvs_by_table()
    for (version, gpu), by_key in tables.items():
        recorded = current.get("sglang", {}).get(version, {}).get(gpu, {})
        missing, extra = set(by_key) - set(recorded), set(recorded) - set(by_key)
        if missing or extra:
            problems.append(
                f"{version}/{gpu}: {len(missing)} flag sets not recorded, {len(extra)} no longer launched"
            )
            continue
        records = current["records"]
        refused = sorted(k for k, i in recorded.items() if not records[i]["ok"])
        accepted = sorted(k for k, i in recorded.items() if records[i]["ok"])
        step = max(1, len(accepted) // max(1, sample))
        chosen[(version, gpu)] = refused + accepted[::step][:sample]
        asked[(version, gpu)] = [by_key[k] for k in chosen[(version, gpu)]]
    for (version, gpu), got in _ask(asked).items():
        flags = flag_table(version)
        for key, verdict in zip(chosen[(version, gpu)], got, strict=True):
            explicit = parse(list(tables[(version, gpu)][key]), flags).explicit
            want = current["records"][current["sglang"][version][gpu][key]]
            if record(version, verdict, explicit) != want:
                problems.append(f"{version}/{gpu}: SGLang now says otherwise about {key}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    parser.add_argument(
        "--sample",
        type=int,
        default=40,
        help="with --check: acceptances re-asked per table (all refusals are)",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="ask only about flag sets not yet recorded; keep the rest, drop those no longer launched",
    )
    args = parser.parse_args()
    if args.check:
        problems = check(args.sample)
        for problem in problems[:20]:
            print(problem, file=sys.stderr)
        if problems:
            print(f"{verdicts.DATA} is stale: run {Path(__file__).name}", file=sys.stderr)
        return 1 if problems else 0
    data = generate(update=args.update)
    verdicts.DATA.write_text(dump(data))
    count = sum(len(t) for v in data["sglang"].values() for t in v.values())
    print(f"wrote {verdicts.DATA} ({count} verdicts, {len(data['records'])} distinct)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
