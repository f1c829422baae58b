#!/usr/bin/env python3
"""Record real SGLang's verdicts on the stand-in's flag sets: src/bwtune/standin/sglang_verdicts.json.

    .venv/bin/python scripts/gen_standin_verdicts.py          # (re)write the file
    .venv/bin/python scripts/gen_standin_verdicts.py --check  # exit 1 when it is stale
                                                              # (re-asks a sample; --sample N)

For every shipped stand-in profile (its SGLang release and GPU) it asks the oracle (real
SGLang in its own venv, GPU simulated: tests/oracle/sglang_oracle.py) about: every config
the examples plan (valid or pruned), each choice of the backend flags a sweep varies, and
the speculative settings, on the fixture checkpoint. The stand-in looks a verdict up by the
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
sys.path.insert(0, str(REPO / "tests" / "oracle"))
import sglang_oracle  # noqa: E402  (real SGLang as the oracle)

from ansible_collections.bwtune.sglang.plugins.module_utils import catalog, planner  # noqa: E402
from bwtune.standin import verdicts  # noqa: E402
from bwtune.standin.args import flag_table, parse  # noqa: E402
from bwtune.standin.profile import load_profile  # noqa: E402

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


def example_argvs(version: str, gpu: str) -> list[list[str]]:
    """Every config (valid or pruned) the shipped examples plan for this release and GPU."""
    table = catalog.get_table(version)
    out: list[list[str]] = []
    for path in sorted((REPO / "examples").glob("*.yml")):
        matrix = copy.deepcopy(yaml.safe_load(path.read_text()))
        if not isinstance(matrix, dict) or "model" not in matrix:
            continue
        matrix["model"]["path"] = MODEL
        matrix.setdefault("sglang", {})["version"] = version
        for key in ("base", "axes"):  # spell flags as this release does, drop choices it lacks
            matrix[key] = {
                (k if table.lookup(k) else table.successor(k) or k): v
                for k, v in (matrix.get(key) or {}).items()
            }
        for axis, values in list(matrix["axes"].items()):
            spec = table.lookup(axis)
            if spec is not None and spec.choices:
                matrix["axes"][axis] = [v for v in values if v in spec.choices]
        try:
            out += [c.argv for c in planner.plan(matrix, gpu=gpu).configs if c.status != "duplicate"]
        except Exception as exc:  # an example for another release: say so, keep going
            print(f"skipped {path.name} for {version}/{gpu}: {exc}", file=sys.stderr)
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


def record(version: str, verdict: dict[str, Any]) -> dict[str, Any]:
    where = verdict.get("where")
    return {
        "ok": bool(verdict["ok"]),
        "error_type": verdict.get("error_type") or "",
        "error": verdict.get("error") or "",
        "where": where,
        "function": enclosing_function(version, where) if where else None,
        "statement": verdict.get("statement"),
        "resolved": {
            f: verdict["values"][f] for f in verdicts.RESOLVED if f in (verdict.get("values") or {})
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


def generate() -> dict[str, Any]:
    data: dict[str, Any] = {"schema": 1, "generated_by": "scripts/gen_standin_verdicts.py", "sglang": {}}
    for (version, gpu), by_key in argvs_by_table().items():
        keys = sorted(by_key)
        answers = sglang_oracle.evaluate(version, gpu, [by_key[k] for k in keys])
        table = data["sglang"].setdefault(version, {}).setdefault(gpu, {})
        for key, verdict in zip(keys, answers, strict=True):
            table[key] = record(version, verdict)
    return data


def check(sample: int) -> list[str]:
    """Why the file is stale, if it is: the flag sets it covers must be exactly those the
    examples, probes and tests launch (no oracle needed), and real SGLang must still give
    every recorded refusal and a spread sample of `sample` acceptances per table."""
    current = json.loads(verdicts.DATA.read_text()) if verdicts.DATA.exists() else {}
    problems: list[str] = []
    for (version, gpu), by_key in argvs_by_table().items():
        recorded = current.get("sglang", {}).get(version, {}).get(gpu, {})
        missing, extra = set(by_key) - set(recorded), set(recorded) - set(by_key)
        if missing or extra:
            problems.append(
                f"{version}/{gpu}: {len(missing)} flag sets not recorded, {len(extra)} no longer launched"
            )
            continue
        refused = sorted(k for k, r in recorded.items() if not r["ok"])
        accepted = sorted(k for k, r in recorded.items() if r["ok"])
        step = max(1, len(accepted) // max(1, sample))
        keys = refused + accepted[::step][:sample]
        answers = sglang_oracle.evaluate(version, gpu, [by_key[k] for k in keys])
        for key, verdict in zip(keys, answers, strict=True):
            if record(version, verdict) != recorded[key]:
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
    args = parser.parse_args()
    if args.check:
        problems = check(args.sample)
        for problem in problems[:20]:
            print(problem, file=sys.stderr)
        if problems:
            print(f"{verdicts.DATA} is stale: run {Path(__file__).name}", file=sys.stderr)
        return 1 if problems else 0
    text = json.dumps(generate(), indent=1, sort_keys=True) + "\n"
    verdicts.DATA.write_text(text)
    count = sum(len(t) for v in json.loads(text)["sglang"].values() for t in v.values())
    print(f"wrote {verdicts.DATA} ({count} verdicts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
