# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The canonical prompts of the correctness gate, with the greedy answers they must get.

The sweep's correctness gate sends these prompts to a freshly launched server and checks the
answers. Every answer is one a working model gets right at temperature 0. The SGLang
stand-in (src/bwtune/standin) does not know these prompts: it answers from a small general
knowledge (arithmetic, counting, capitals, chemical symbols), so the gate is tested against
a server that could fail it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A thinking model may open with a <think>...</think> block; the answer is what follows.
_THINK_BLOCK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)
_TRAILING_PUNCTUATION = ".!,;:"


@dataclass(frozen=True)
class CorrectnessPrompt:
    """One prompt of the gate.

    name: a short stable id (used in logs and results).
    prompt: the exact text sent (as `text` to /generate, `prompt` to /v1/completions, or the
        one user message to /v1/chat/completions).
    mode: "chat" for an instruction that expects a chat answer, "completion" for a prefix the
        model continues (`The capital of France is` -> ` Paris`).
    expected: the answer the greedy output must start with (after a think block and
        leading whitespace; compared case-insensitively, trailing punctuation ignored).
    max_new_tokens: enough tokens for the answer (a gate may send more).
    """

    name: str
    prompt: str
    mode: str
    expected: str
    max_new_tokens: int = 16

    def is_correct(self, output: str) -> bool:
        return answer_matches(self.expected, output)


PROMPTS: tuple[CorrectnessPrompt, ...] = (
    CorrectnessPrompt("add-2-3", "What is 2+3? Answer with a number only.", "chat", "5"),
    CorrectnessPrompt("mul-7-8", "What is 7*8? Answer with a number only.", "chat", "56"),
    CorrectnessPrompt("capital-france", "The capital of France is", "completion", " Paris"),
    CorrectnessPrompt("symbol-gold", "The chemical symbol for gold is", "completion", " Au"),
    CorrectnessPrompt(
        "count-to-5",
        "Count from 1 to 5, separated by commas. Answer with the numbers only.",
        "chat",
        "1, 2, 3, 4, 5",
        max_new_tokens=24,
    ),
)

BY_NAME: dict[str, CorrectnessPrompt] = {p.name: p for p in PROMPTS}


def _normalize(text: str) -> str:
    text = _THINK_BLOCK.sub("", text, count=1)
    return " ".join(text.split()).casefold()


def answer_matches(expected: str, output: str) -> bool:
    """True when `output` starts with `expected` (see CorrectnessPrompt.expected)."""
    want = _normalize(expected).rstrip(_TRAILING_PUNCTUATION)
    got = _normalize(output)
    if not want:
        return False
    if not got.startswith(want):
        return False
    # "5" must not pass for "56": the answer ends at a word boundary.
    rest = got[len(want) :]
    return not rest or not (rest[0].isalnum())


def find_prompt(text: str) -> CorrectnessPrompt | None:
    """The gate prompt contained in `text` (which may carry a chat template), or None.

    When several are contained the longest wins, so a prompt that extends another is found.
    """
    found = [p for p in PROMPTS if p.prompt in text]
    if not found:
        return None
    return max(found, key=lambda p: len(p.prompt))
