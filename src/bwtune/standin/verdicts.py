"""What real SGLang's argument processing said about a set of flags, recorded.

The stand-in refuses and resolves flags the way real SGLang did, not the way the planner's
rules predict: `sglang_verdicts.json` (beside this file) holds real SGLang's verdicts per
release and GPU, produced by `scripts/gen_standin_verdicts.py` from the oracle venvs
(tests/oracle/, real SGLang with the GPU simulated) and kept fresh by an oracle-tier test.
A verdict is found by the flags given (the neutral ones, which cannot change a verdict, left
out). Flags with no recorded verdict pass with argparse's checks only, and the stand-in
says so in its log.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("sglang_verdicts.json")
# Flags that name things (paths, addresses, logging) and never change a verdict.
NEUTRAL = frozenset(
    {
        "model-path", "tokenizer-path", "host", "port", "api-key", "served-model-name",
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


@functools.cache
def _load(path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text())
    return data


def lookup(version: str, gpu: str, explicit: dict[str, Any], path: Path = DATA) -> Verdict | None:
    """Real SGLang's recorded verdict on these flags, or None when none was recorded."""
    if not path.exists():
        return None
    table = _load(str(path)).get("sglang", {}).get(version, {}).get(gpu, {})
    record = table.get(key_of(explicit))
    if record is None:
        return None
    return Verdict(
        ok=bool(record["ok"]),
        error_type=record.get("error_type") or "",
        error=record.get("error") or "",
        where=record.get("where"),
        function=record.get("function"),
        statement=record.get("statement"),
        resolved=dict(record.get("resolved") or {}),
    )
