"""What the stand-in says: answers from a tiny deterministic "knowledge" (arithmetic,
counting, capitals, chemical symbols) for any prompt that asks for them, deterministic
filler otherwise, and the garbage a broken kernel produces when a fault asks for it.

The knowledge is general on purpose: it knows nothing of the correctness gate's prompts
(plugins/module_utils/_bench/correctness_prompts.py, which this package must not import), so a
gate that asked something else, or checked answers wrongly, fails against the stand-in the
way it would against a model.

Tokens here are word pieces (" Paris", ",", " 3"): close enough to a real tokenizer for
token counts and streaming, and cheap. Token ids are stable per piece.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

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

# -- the knowledge (facts any instruction-tuned model of this size answers at temperature 0)
CAPITALS = {
    "australia": "Canberra", "brazil": "Brasília", "canada": "Ottawa", "china": "Beijing",
    "egypt": "Cairo", "france": "Paris", "germany": "Berlin", "india": "New Delhi",
    "italy": "Rome", "japan": "Tokyo", "kenya": "Nairobi", "mexico": "Mexico City",
    "poland": "Warsaw", "portugal": "Lisbon", "russia": "Moscow", "spain": "Madrid",
    "sweden": "Stockholm", "the united kingdom": "London", "the united states": "Washington, D.C.",
}  # fmt: skip
SYMBOLS = {
    "carbon": "C", "copper": "Cu", "gold": "Au", "helium": "He", "hydrogen": "H", "iron": "Fe",
    "lead": "Pb", "mercury": "Hg", "nitrogen": "N", "oxygen": "O", "potassium": "K",
    "silver": "Ag", "sodium": "Na", "tin": "Sn", "tungsten": "W", "zinc": "Zn",
}  # fmt: skip
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "x": lambda a, b: a * b}
_ARITHMETIC = re.compile(r"(-?\d+)\s*([+\-*x\u00d7])\s*(-?\d+)")
_ASKS_TO_COMPUTE = re.compile(r"\b(?:what is|what's|compute|calculate|evaluate)\b", re.I)
_COUNT = re.compile(r"\bcount from (-?\d+) to (-?\d+)", re.I)
_CAPITAL = re.compile(r"\bcapital (?:city )?of ([A-Za-z][A-Za-z .'-]*?)\s*(?:\?|\bis\s*$|$|[.,])", re.I)
_SYMBOL = re.compile(r"\bchemical symbol (?:for|of) ([A-Za-z]+)\s*(?:\?|\bis\s*$|$|[.,])", re.I)
# A chat template around the prompt: answer the last user turn.
_USER_TURN = re.compile(r"<\|im_start\|>user\n(.*?)(?:<\|im_end\|>|$)", re.S)


def _question(text: str) -> str:
    turns = _USER_TURN.findall(text)
    return (turns[-1] if turns else text).strip()


def answer(text: str) -> str | None:
    """The answer a greedy model gives to `text`, when the knowledge covers it.

    A prompt that ends mid-sentence ("The capital of Italy is") is continued (" Rome");
    a question gets the bare answer ("42"). None when the prompt asks for nothing known.
    """
    q = _question(text)
    continuation = not q.rstrip().endswith(("?", "."))
    lead = " " if continuation else ""
    m = _COUNT.search(q)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        if abs(b - a) <= 100:
            step = 1 if b >= a else -1
            sep = ", " if "comma" in q.lower() else " "
            return lead + sep.join(str(i) for i in range(a, b + step, step))
    m = _ARITHMETIC.search(q) if _ASKS_TO_COMPUTE.search(q) or q.rstrip().endswith("=") else None
    if m:
        op = "*" if m.group(2) in ("x", "\u00d7") else m.group(2)
        return lead + str(_OPS[op](int(m.group(1)), int(m.group(3))))
    m = _CAPITAL.search(q)
    if m:
        place = m.group(1).strip().lower()
        capital = CAPITALS.get(place) or CAPITALS.get(f"the {place}")
        if capital:
            return lead + capital
    m = _SYMBOL.search(q)
    if m and m.group(1).lower() in SYMBOLS:
        return lead + SYMBOLS[m.group(1).lower()]
    return None


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
    known = None if prompt_key.startswith("ids:") else answer(prompt_key)
    if known is not None:
        pieces = split_pieces(known)
        if not ignore_eos:
            return Completion(
                pieces[: max_new_tokens or None], stops_at_eos=len(pieces) <= (max_new_tokens or 1 << 30)
            )
        pieces = pieces + _filler(prompt_key, max(0, (max_new_tokens or 0) - len(pieces)))
        return Completion(pieces[: max_new_tokens or None], stops_at_eos=False)
    if max_new_tokens is None:
        return Completion(_filler(prompt_key, FILLER_WHEN_UNBOUNDED), stops_at_eos=True)
    return Completion(_filler(prompt_key, max_new_tokens), stops_at_eos=False)


def _filler(seed: str, n: int) -> list[str]:
    digest = hashlib.blake2s(seed.encode("utf-8", "surrogatepass"), digest_size=4).digest()
    start = int.from_bytes(digest, "big")
    words = _FILLER_WORDS
    return [" " + words[(start + i * 7) % len(words)] for i in range(n)]
