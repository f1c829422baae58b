"""Real SGLang as the oracle for bwtune's flag catalog and rules (pytest side).

Import it from tests as a plain module:

    from tests.oracle.sglang_oracle import evaluate, oracle_python, QWEN35_NVFP4

    [result] = evaluate("0.5.23", "sm120", [["--model-path", str(QWEN35_NVFP4), "--tp", "8"]])
    result["ok"], result["error_type"], result["error"], result["where"], result["statement"],
    result["values"]

Every release runs in the one shared environment (the oracle venv of releases.SHARED, built
by `oracle_python` with tests/oracle/make_venv.sh on first use, a few minutes; cached under
build/oracle/) with the release installed --no-deps into its own directory (releases.py).
`evaluate` runs tests/oracle/sglang_eval.py there: one process per call, a forked child
per case (~0.3 CPU-s a case). `evaluate_release` asks one release about several GPUs in
one process, every case in-process (~0.035 CPU-s a case, same verdicts): what the
differential suite uses to check every release on every GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Imported as tests.oracle.* (pytest): siblings from the package, one copy each; run as a
# script or imported by its bare name (scripts/): siblings by their bare names too.
if __package__:
    from tests.oracle import releases
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import releases

ORACLE_DIR = Path(__file__).resolve().parent
REPO_ROOT = ORACLE_DIR.parent.parent
BUILD_DIR = REPO_ROOT / "build" / "oracle"
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "models"
QWEN35_NVFP4 = FIXTURES / "qwen35-397b-a17b-nvfp4"

CURRENT = "0.5.23"
MARCH_2026 = "0.5.9"  # on PyPI 2026-02-23; 0.5.10rc0 came 2026-03-27
VERSIONS = (CURRENT, MARCH_2026)
GPUS = ("sm120", "sm100", "sm90")

# A build of one venv takes minutes; evaluating takes seconds per call plus ~0.1 s a case.
_BUILD_TIMEOUT_S = 1800


class OracleError(RuntimeError):
    """The oracle itself failed (venv build, evaluator crash), not SGLang's verdict."""


def oracle_python(version: str) -> Path:
    """Python of the oracle venv for SGLang `version`, built if missing or stale."""
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    python = BUILD_DIR / f"sglang-{version}" / "bin" / "python"
    proc = subprocess.run(  # idempotent, and locks against parallel builders itself
        ["bash", str(ORACLE_DIR / "make_venv.sh"), version],
        capture_output=True,
        text=True,
        timeout=_BUILD_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0 or not python.exists():
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise OracleError(f"make_venv.sh {version} failed (exit {proc.returncode}):\n{tail}")
    return python


def _run_eval(version: str, request: dict[str, Any], cases: int, what: str) -> Any:
    """Run sglang_eval.py with `request` for release `version` ("local": the shared venv's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_", "PYTHONPATH"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    if version != "local":  # the shared environment, the release on PYTHONPATH
        releases.ensure(version)
        env["PYTHONPATH"] = releases.pythonpath(version)
    python = releases.shared_python()
    proc = subprocess.run(
        [str(python), str(ORACLE_DIR / "sglang_eval.py")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=180 + 10 * cases,
        check=False,
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise OracleError(f"sglang_eval.py ({version}, {what}) failed (exit {proc.returncode}):\n{tail}")
    return json.loads(proc.stdout)


def evaluate(version: str, gpu: str, argvs: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """SGLang `version`'s verdict on each argv (what follows `python -m sglang.launch_server`).

    Each result: {"ok", "error_type" (ArgumentError for argparse's own refusals), "error"
    (first line of the message; "" for a bare assert), "where" (sglang/...py:LINE that
    raised), "statement" (that whole statement on one line), "values" ({flag: final
    value} for every flag of the release's parser, on success; {} on failure)}.
    An unset --random-seed comes back as a fresh random number each time.
    """
    if gpu not in GPUS:
        raise ValueError(f"gpu {gpu!r} is not one of {GPUS}")
    request = {"gpu": gpu, "cases": [list(map(str, argv)) for argv in argvs]}
    results: list[dict[str, Any]] = _run_eval(version, request, len(argvs), gpu)
    if len(results) != len(argvs):
        raise OracleError(f"sglang_eval.py answered {len(results)} cases for {len(argvs)}")
    return results


def evaluate_release(
    version: str, argvs_by_gpu: Mapping[str, Sequence[Sequence[str]]]
) -> dict[str, list[dict[str, Any]]]:
    """`evaluate` for several GPUs of one release in one process, each case in-process.

    SGLang's dependencies are imported once, SGLang once per GPU; between cases the
    evaluator puts back the environment, SGLang's module globals and caches
    (sglang_eval.py). Same results as `evaluate`, about 8 times cheaper.
    """
    unknown = sorted(set(argvs_by_gpu) - set(GPUS))
    if unknown:
        raise ValueError(f"gpus {unknown} are not among {GPUS}")
    request = {"gpus": {g: [list(map(str, a)) for a in argvs] for g, argvs in argvs_by_gpu.items()}}
    total = sum(len(a) for a in argvs_by_gpu.values())
    answers: dict[str, list[dict[str, Any]]] = _run_eval(version, request, total, ",".join(argvs_by_gpu))
    for gpu, argvs in argvs_by_gpu.items():
        got = answers.get(gpu, [])
        if len(got) != len(argvs):
            raise OracleError(f"sglang_eval.py answered {len(got)} {gpu} cases for {len(argvs)}")
        dead = [r["error"] for r in got if r["error_type"] == "OracleError"]
        if dead:  # the evaluator itself failed: no verdict to compare
            raise OracleError(f"sglang_eval.py ({version}, {gpu}): {len(dead)} cases failed: {dead[0]}")
    return answers
