"""What the stand-in says: correct answers to the gate's prompts, deterministic filler
otherwise, and the garbage a broken kernel produces when a fault asks for it.

Tokens here are word pieces (" Paris", ",", " 3"): close enough to a real tokenizer for
token counts and streaming, and cheap. Token ids are stable per piece.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ansible_collections.bwtune.sglang.plugins.module_utils.correctness_prompts import find_prompt

_PIECE = re.compile(r"\s?\w+|\s?[^\w\s]|\s+")

# Qwen3.5's end-of-text ids (generation_config.json); used as `matched` in finish_reason.
EOS_TOKEN_ID = 248044
_FILLER_TEXT = (
    "the model streams simulated tokens from a stand-in server while bwtune measures "
    "throughput latency and correctness across each launch config on the simulated "
    "blackwell node with expert parallel kernels and a shared clock for every request"
)
_FILLER_WORDS = tuple(_FILLER_TEXT.split(" "))
# A broken FP4 kernel tends to produce one token over and over (often "!").
GARBAGE_PIECE = "!"
FILLER_WHEN_UNBOUNDED = 48


def count_tokens(text: str) -> int:
    return max(1, len(_PIECE.findall(text))) if text else 0


def split_pieces(text: str) -> list[str]:
    return _PIECE.findall(text)


def piece_id(piece: str) -> int:
    return 1000 + int.from_bytes(hashlib.blake2s(piece.encode(), digest_size=3).digest(), "big") % 150000


@dataclass(frozen=True)
class Completion:
    pieces: list[str]
    stops_at_eos: bool  # True: finish_reason "stop" when the pieces run out


def plan_completion(
    prompt_key: str, max_new_tokens: int | None, ignore_eos: bool, garbage: bool
) -> Completion:
    """The pieces a greedy model would produce for this prompt.

    prompt_key: the prompt text (or, for token-id prompts, a stable string of the ids).
    """
    if garbage:
        n = max_new_tokens if max_new_tokens is not None else FILLER_WHEN_UNBOUNDED
        return Completion([GARBAGE_PIECE] * n, stops_at_eos=False)
    gate = find_prompt(prompt_key)
    if gate is not None:
        answer = split_pieces(gate.expected if gate.mode == "completion" else gate.expected.lstrip())
        if not ignore_eos:
            return Completion(
                answer[: max_new_tokens or None], stops_at_eos=len(answer) <= (max_new_tokens or 1 << 30)
            )
        pieces = answer + _filler(prompt_key, max(0, (max_new_tokens or 0) - len(answer)))
        return Completion(pieces[: max_new_tokens or None], stops_at_eos=False)
    if max_new_tokens is None:
        return Completion(_filler(prompt_key, FILLER_WHEN_UNBOUNDED), stops_at_eos=True)
    return Completion(_filler(prompt_key, max_new_tokens), stops_at_eos=False)


def _filler(seed: str, n: int) -> list[str]:
    digest = hashlib.blake2s(seed.encode("utf-8", "surrogatepass"), digest_size=4).digest()
    start = int.from_bytes(digest, "big")
    words = _FILLER_WORDS
    return [" " + words[(start + i * 7) % len(words)] for i in range(n)]
