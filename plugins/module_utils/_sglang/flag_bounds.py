# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The values a launch flag may take beyond its type: ranges the planner checks at plan time.

SGLang's parser accepts any int for `--tp-size` and any float for `--mem-fraction-static`
(`0`, `-8`, `7.5`, `nan` all start a server that then fails or measures nonsense). What
the parser would accept is the floor, not the bar: here every number must be finite, every
int fit in 32 bits, and the flags below stay in the range that means something.
"""

from __future__ import annotations

import math
from typing import Any

INT_LIMIT = 2**31 - 1

# flag -> (least, greatest, what the range means); None: no bound on that side.
_PARALLEL = (1, 1024, "a parallel size")
_BATCH = (1, 65536, "a batch or request count")
_TOKENS = (1, INT_LIMIT, "a token count")
_FRACTION = (0.0, 1.0, "a fraction")
BOUNDS: dict[str, tuple[float, float | None, str]] = {
    **{
        flag: _PARALLEL
        for flag in (
            "tp-size",
            "pp-size",
            "dp-size",
            "ep-size",
            "attn-cp-size",
            "attn-dp-size",
            "dcp-size",
            "moe-dp-size",
            "moe-dense-tp-size",
            "shared-experts-tp-size",
            "max-ep-size",
            "nnodes",
        )
    },
    **{
        flag: _BATCH
        for flag in (
            "max-running-requests",
            "cuda-graph-max-bs",
            "cuda-graph-max-bs-decode",
            "cuda-graph-max-bs-prefill",
            "torch-compile-max-bs",
            "stream-interval",
            "num-continuous-decode-steps",
            "detokenizer-worker-num",
            "tokenizer-worker-num",
            "page-size",
        )
    },
    **{flag: _TOKENS for flag in ("context-length", "max-prefill-tokens", "max-total-tokens")},
    "chunked-prefill-size": (-1, INT_LIMIT, "a token count, or -1 (no chunking)"),
    "speculative-num-steps": (1, 64, "a number of draft steps"),
    "speculative-eagle-topk": (1, 64, "a top-k"),
    "speculative-num-draft-tokens": (1, 1024, "a number of draft tokens"),
    "port": (1, 65535, "a TCP port"),
    "nccl-port": (1, 65535, "a TCP port"),
    **{
        flag: _FRACTION
        for flag in ("mem-fraction-static", "swa-full-tokens-ratio", "mamba-full-memory-ratio")
    },
    "schedule-conservativeness": (0.0, None, "a positive factor"),
}
# Fractions exclude their lower end: 0 of the GPU's memory is no setting.
_OPEN_BELOW = {flag for flag, bound in BOUNDS.items() if bound is _FRACTION} | {"schedule-conservativeness"}


def problem(flag: str, value: Any) -> str | None:
    """Why `value` (coerced) is no value for `--flag`, or None when it is fine."""
    if isinstance(value, (list, tuple)):
        for item in value:
            found = problem(flag, item)
            if found:
                return found
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "--%s must be a finite number, got %r" % (flag, value)
    if isinstance(value, int) and abs(value) > INT_LIMIT:
        return "--%s is out of range (at most %d in size), got %d" % (flag, INT_LIMIT, value)
    bound = BOUNDS.get(flag)
    if bound is None:
        return None
    least, greatest, meaning = bound
    low_ok = value > least if flag in _OPEN_BELOW else value >= least
    high_ok = greatest is None or value <= greatest
    if low_ok and high_ok:
        return None
    if flag in _OPEN_BELOW:
        wanted = "> %g" % least if greatest is None else "in (%g, %g]" % (least, greatest)
    elif greatest is None:
        wanted = ">= %g" % least
    else:
        wanted = "between %g and %g" % (least, greatest)
    return "--%s must be %s (%s), got %r" % (flag, wanted, meaning, value)
