"""What real SGLang's argument processing said about a set of flags, recorded.

The stand-in refuses and resolves flags the way real SGLang did, not the way the planner's
rules predict: `sglang_verdicts.json` (beside this file) holds real SGLang's verdicts per
release and GPU, produced by `scripts/gen_standin_verdicts.py` from the oracle venvs
(tests/oracle/, real SGLang with the GPU simulated) and kept fresh by an oracle-tier test.
A verdict is found by the flags given (the neutral ones, which cannot change a verdict, left
out). Flags with no recorded verdict are never accepted silently: when real SGLang of the
profile's release is importable (`BWTUNE_STANDIN_SGLANG_PYTHON` names a python that imports it,
with `BWTUNE_STANDIN_SGLANG_PYTHONPATH` if it needs one, or `sglang` imports in the stand-in's
own interpreter), its own argument processing gives the verdict (`ask_sglang`); otherwise the
stand-in refuses them in one line (`MissingVerdict`).

This module never consults the planner's rules (plugins/module_utils/_sglang/rules.py): the verdicts
are what real SGLang said, so they can test those rules.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("sglang_verdicts.json")
PYTHON_ENV = "BWTUNE_STANDIN_SGLANG_PYTHON"  # a python that imports real SGLang
PYTHONPATH_ENV = "BWTUNE_STANDIN_SGLANG_PYTHONPATH"  # its PYTHONPATH (a release copy), if any
EVALUATOR_ENV = "BWTUNE_STANDIN_SGLANG_EVAL"  # the evaluator script (default: the checkout's)
# Real SGLang's argument processing with the GPU simulated (the oracle's evaluator).
EVALUATOR = Path(__file__).resolve().parents[3] / "tests" / "oracle" / "sglang_eval.py"
_EVAL_TIMEOUT_S = 300
# Flags that name things (paths, addresses, logging) and never change a verdict.
NEUTRAL = frozenset(
    {
        "model-path", "tokenizer-path", "host", "port", "api-key", "admin-api-key", "served-model-name",
        "random-seed", "log-level", "log-level-http", "log-requests", "enable-metrics",
        "base-gpu-id", "watchdog-timeout", "download-dir", "trust-remote-code",
    }
)  # fmt: skip
# Flags whose final value the recorded verdicts keep (SGLang resolves `auto` and defaults).
RESOLVED = (
    "moe-runner-backend", "speculative-moe-runner-backend", "fp4-gemm-backend",
    "attention-backend", "prefill-attention-backend", "decode-attention-backend",
    "speculative-algorithm", "speculative-num-steps", "speculative-eagle-topk",
    "speculative-num-draft-tokens", "mamba-radix-cache-strategy", "mamba-scheduler-strategy",
    "disable-radix-cache", "quantization", "kv-cache-dtype", "max-running-requests",
    "tp-size", "ep-size", "dp-size",
)  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    ok: bool
    error_type: str = ""
    error: str = ""
    where: str | None = None  # sglang/...py:LINE that raised
    function: str | None = None
    statement: str | None = None
    resolved: dict[str, Any] = field(default_factory=dict)  # final values of RESOLVED flags


def _canonical(value: Any) -> Any:
    # argparse typed the values already (0.8 stays a float, 8 an int); lists become JSON lists.
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def key_of(explicit: dict[str, Any]) -> str:
    """The lookup key of the flags given on a command line (parsed, typed by argparse)."""
    items = sorted((k, _canonical(v)) for k, v in explicit.items() if k not in NEUTRAL)
    return json.dumps(items, separators=(",", ":"), default=str)


class MissingVerdict(Exception):
    """No recorded verdict for these flags, and no real SGLang to ask: the one-line refusal."""


def _shown(explicit: dict[str, Any]) -> str:
    words = []
    for name, value in sorted(explicit.items()):
        if name in NEUTRAL:
            continue
        words.append(f"--{name}" if value is True else f"--{name} {_canonical(value)}")
    return " ".join(words) or "(no flags beyond --model-path)"


@functools.cache
def _load(path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text())
    return data


def _verdict(record: dict[str, Any], explicit: dict[str, Any]) -> Verdict:
    # The file keeps, of the resolved values, only those that differ from the flags given.
    resolved = {f: _canonical(explicit[f]) for f in RESOLVED if f in explicit} if record["ok"] else {}
    resolved.update(record.get("resolved") or {})
    return Verdict(
        ok=bool(record["ok"]),
        error_type=record.get("error_type") or "",
        error=record.get("error") or "",
        where=record.get("where"),
        function=record.get("function"),
        statement=record.get("statement"),
        resolved=resolved,
    )


def lookup(version: str, gpu: str, explicit: dict[str, Any], path: Path = DATA) -> Verdict | None:
    """Real SGLang's recorded verdict on these flags, or None when none was recorded."""
    if not path.exists():
        return None
    data = _load(str(path))
    table = data.get("sglang", {}).get(version, {}).get(gpu, {})
    index = table.get(key_of(explicit))
    if index is None:
        return None
    return _verdict(data["records"][index], explicit)


def _sglang_python() -> tuple[str, str | None] | None:
    """(python, PYTHONPATH) of a real SGLang to ask, or None when there is none."""
    python = os.environ.get(PYTHON_ENV)
    if python:
        return python, os.environ.get(PYTHONPATH_ENV) or None
    if importlib.util.find_spec("sglang") is not None:
        return sys.executable, None
    return None


def _run(argv: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, input=stdin, capture_output=True, text=True, env=env, timeout=_EVAL_TIMEOUT_S, check=False
    )


def ask_sglang(version: str, gpu: str, argv: list[str], explicit: dict[str, Any]) -> Verdict:
    """Real SGLang's own argument processing on `argv` (GPU `gpu` simulated), when no verdict
    was recorded. Raises MissingVerdict (one line) when no SGLang `version` can be asked."""
    shown = f"no recorded verdict for {_shown(explicit)} (SGLang {version}, {gpu})"
    found = _sglang_python()
    if found is None:
        raise MissingVerdict(
            f"{shown}: real SGLang is not importable here; set {PYTHON_ENV} to a python that "
            f"imports SGLang {version}, or record the flags with scripts/gen_standin_verdicts.py"
        )
    python, pythonpath = found
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_", "PYTHONPATH"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    try:
        probe = _run([python, "-c", "import importlib.metadata as m; print(m.version('sglang'))"], env)
    except OSError as exc:
        raise MissingVerdict(f"{shown}: {PYTHON_ENV}={python}: {exc.strerror}") from None
    have = probe.stdout.strip()
    if probe.returncode != 0 or have != version:
        why = f"it has SGLang {have}" if probe.returncode == 0 else "it cannot import SGLang"
        raise MissingVerdict(f"{shown}: {python} cannot answer for SGLang {version}: {why}")
    evaluator = Path(os.environ.get(EVALUATOR_ENV) or EVALUATOR)
    if not evaluator.is_file():
        raise MissingVerdict(f"{shown}: no SGLang argument evaluator at {evaluator} (set {EVALUATOR_ENV})")
    request = json.dumps({"gpu": gpu, "cases": [[str(a) for a in argv]]})
    proc = _run([python, str(evaluator)], env, request)
    try:
        [answer] = json.loads(proc.stdout) if proc.returncode == 0 else [None]
        if not isinstance(answer, dict):
            raise TypeError(answer)
        ok = bool(answer["ok"])
    except (ValueError, TypeError, KeyError):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise MissingVerdict(f"{shown}: asking {python} failed (exit {proc.returncode}): {last}") from None
    if answer.get("error_type") == "OracleError":
        raise MissingVerdict(f"{shown}: asking {python} failed: {answer.get('error')}")
    values = answer.get("values") or {}
    return Verdict(
        ok=ok,
        error_type=answer.get("error_type") or "",
        error=answer.get("error") or "",
        where=answer.get("where"),
        statement=answer.get("statement"),
        resolved={f: values[f] for f in RESOLVED if f in values},
    )
