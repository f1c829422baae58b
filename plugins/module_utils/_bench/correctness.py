# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The correctness gate: a config that emits garbage is `wrong-output` and can never win.

A freshly started server answers the canonical prompts (correctness_prompts.PROMPTS) greedily.
It fails the gate when any answer is empty, one token repeated, a sampling error
("probability tensor contains either inf, nan or element < 0"), not the expected answer, or
far from what the first passing config answered (the reference: greedy outputs of the same
model agree closely across correct kernels; a broken one drifts).
"""

from __future__ import annotations

import asyncio
import difflib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_client import BenchClient
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.correctness_prompts import (
    PROMPTS,
    CorrectnessPrompt,
)

# torch.multinomial's message when logits hold NaN/inf: the classic broken-kernel symptom.
_NAN_ERROR = re.compile(r"probability tensor contains either|\bnan\b.*\binf\b|\binf\b.*\bnan\b", re.I)
# Below this similarity to the reference's answer (difflib ratio on the first characters)
# an answer counts as far from it.
MIN_REFERENCE_SIMILARITY = 0.5
_COMPARE_CHARS = 64
_THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)


@dataclass
class GateResult:
    passed: bool
    message: str
    outputs: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "output", "problem"}]
    # time.monotonic() when the first answer with text arrived: the launch's first token, late
    # by at most the decode of that prompt's max_new_tokens (16-24); None when none answered.
    first_answer_at: float | None = None


def repeated_unit(text: str, min_repeats: int = 6) -> str | None:
    """The unit if `text` is one short unit (a token's worth: 1-12 chars) repeated, else None."""
    s = text.strip()
    if len(s) < min_repeats:
        return None
    words = s.split()
    if len(words) >= min_repeats and len(set(words)) == 1:
        return words[0]
    for k in range(1, 13):
        if len(s) < k * min_repeats:
            break
        unit = s[:k]
        if (unit * (len(s) // k + 1)).startswith(s):
            return unit
    return None


def problem_with(prompt: CorrectnessPrompt, output: str | None, error: str) -> str | None:
    """Why an answer is garbage, or None when it is correct."""
    if error:
        if _NAN_ERROR.search(error):
            return f"sampling error (NaN/inf logits): {error[:200]}"
        return f"request failed: {error[:200]}"
    text = output or ""
    if _NAN_ERROR.search(text):
        return f"sampling error text in the output: {text.strip()[:120]!r}"
    if not _THINK.sub("", text).strip():
        return "empty output"
    unit = repeated_unit(_THINK.sub("", text))
    if unit is not None:
        return f"one token repeated: {unit!r} x {len(text.strip()) // max(len(unit), 1)}"
    if not prompt.is_correct(text):
        return f"expected an answer starting {prompt.expected.strip()!r}, got {text.strip()[:80]!r}"
    return None


def similarity(a: str, b: str) -> float:
    a, b = _THINK.sub("", a).strip()[:_COMPARE_CHARS], _THINK.sub("", b).strip()[:_COMPARE_CHARS]
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def check_outputs(
    prompts: Sequence[CorrectnessPrompt],
    outputs: Sequence[str | None],
    errors: Sequence[str],
    reference: Sequence[dict[str, Any]] | None = None,
    min_similarity: float = MIN_REFERENCE_SIMILARITY,
) -> GateResult:
    """Judge a config's answers; `reference` is a passing config's GateResult.outputs."""
    ref = {r["name"]: r.get("output") or "" for r in reference or []}
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for p, out, err in zip(prompts, outputs, errors, strict=True):
        problem = problem_with(p, out, err)
        if problem is None and p.name in ref:
            sim = similarity(out or "", ref[p.name])
            if sim < min_similarity:
                problem = (
                    f"far from the reference answer (similarity {sim:.2f} < {min_similarity}): "
                    f"{(out or '').strip()[:60]!r} vs {ref[p.name].strip()[:60]!r}"
                )
        rows.append({"name": p.name, "output": out, "problem": problem})
        if problem:
            problems.append(f"{p.name}: {problem}")
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return GateResult(
            False, f"wrong output on {len(problems)}/{len(prompts)} prompts: {problems[0]}{more}", rows
        )
    return GateResult(True, f"{len(prompts)} prompts answered correctly", rows)


async def _ask(client: BenchClient, p: CorrectnessPrompt, timeout_s: float) -> tuple[str | None, str]:
    """(output, error) for one prompt: completion prompts through /generate, chat prompts
    through /v1/chat/completions with thinking off (the answer must fit in a few tokens)."""
    try:
        if p.mode == "completion":
            ok, text, _error = await client.generate_text(p.prompt, p.max_new_tokens, timeout_s=timeout_s)
            return (text, "") if ok else (None, text)
        payload = {
            "model": client.model,
            "messages": [{"role": "user", "content": p.prompt}],
            "temperature": 0.0,
            "max_tokens": p.max_new_tokens,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        status, obj = await client.http.post_json("/v1/chat/completions", payload, timeout_s=timeout_s)
    except (OSError, asyncio.TimeoutError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if status != 200 or not isinstance(obj, dict):
        detail = obj.get("error", obj) if isinstance(obj, dict) else obj
        if isinstance(detail, dict):
            detail = detail.get("message", detail)
        return None, f"HTTP {status}: {str(detail)[:300]}"
    try:
        return str(obj["choices"][0]["message"]["content"] or ""), ""
    except (KeyError, IndexError, TypeError):
        return None, f"unexpected chat response: {str(obj)[:200]}"


async def gate(
    client: BenchClient,
    prompts: Sequence[CorrectnessPrompt] = PROMPTS,
    reference: Sequence[dict[str, Any]] | None = None,
    timeout_s: float = 120.0,
) -> GateResult:
    arrivals: list[float] = []

    async def timed(p: CorrectnessPrompt) -> tuple[str | None, str]:
        answer = await _ask(client, p, timeout_s)
        if answer[0] is not None:
            arrivals.append(time.monotonic())
        return answer

    answers = await asyncio.gather(*(timed(p) for p in prompts))
    result = check_outputs(prompts, [a[0] for a in answers], [a[1] for a in answers], reference)
    result.first_answer_at = min(arrivals, default=None)
    return result


def run_gate(
    host: str,
    port: int,
    *,
    reference: Sequence[dict[str, Any]] | None = None,
    api_key: str | None = None,
    prompts: Sequence[CorrectnessPrompt] = PROMPTS,
    timeout_s: float = 120.0,
) -> GateResult:
    """Run the gate against a server (synchronous)."""

    async def main() -> GateResult:
        client = BenchClient(host, port, api_key=api_key)
        try:
            return await gate(client, prompts, reference, timeout_s)
        finally:
            client.close()

    return asyncio.run(main())


# ---------------------------------------------------------------- the gate under load
# Kernels that break only in large or mixed batches pass a gate of one-at-a-time prompts
# (FlashInfer's cutlass FP4 GEMM gave NaN on SM120 only under heterogeneous batches, sglang
# PR 20047; the trtllm MoE runner answered HTTP 200 with corrupted text, sglang issue 26324).
# So the sweep also checks a sample of each workload's own requests (bench_client.
# sample_outputs): concurrent, at the workload's lengths, greedy.

# A share of garbage samples at or above this fails the config: a real model may loop on one
# random-token prompt, a broken kernel garbles a good part of a batch.
MAX_GARBAGE_SHARE = 0.25
# Greedy outputs of the same prompt on two correct configs agree at the start; batch-dependent
# numerics may make them drift later, so only the first characters are compared, and a config
# fails when most of its compared samples are far from the reference's.
MAX_DISAGREEING_SHARE = 0.5


def sample_problem(sample: dict[str, Any], reference_text: str | None) -> str | None:
    """Why one sampled request's output is garbage (or far from the reference), or None."""
    error = str(sample.get("error") or "")
    if not sample.get("ok"):
        return f"sampling error (NaN/inf logits): {error[:160]}" if _NAN_ERROR.search(error) else None
    text = sample.get("text")
    if text is None:  # the API did not return the text: nothing to judge
        return None
    if _NAN_ERROR.search(text):
        return f"sampling error text in the output: {text.strip()[:80]!r}"
    if int(sample.get("output_len") or 0) > 0 and not _THINK.sub("", text).strip():
        return "empty output"
    unit = repeated_unit(_THINK.sub("", text))
    if unit is not None and (reference_text is None or repeated_unit(reference_text) != unit):
        return f"one token repeated: {unit!r} x {len(text.strip()) // max(len(unit), 1)}"
    return None


@dataclass
class OutputAudit:
    """The gate under load, across a sweep: checks each workload's sampled outputs for
    garbage and NaN, and greedy outputs for agreement with the reference config (the first
    config whose samples of that request passed)."""

    min_similarity: float = MIN_REFERENCE_SIMILARITY
    reference: dict[tuple, str] = field(default_factory=dict)  # (workload, rep, index) -> text

    @staticmethod
    def _key(sample: dict[str, Any]) -> tuple:
        return sample.get("workload"), sample.get("rep"), sample.get("index")

    def check(self, samples: Sequence[dict[str, Any]]) -> str | None:
        """A wrong-output message for these samples (one workload of one config), or None.
        A config that passes adds its outputs to the reference for requests without one."""
        if not samples:
            return None
        nan: list[str] = []
        garbage: list[str] = []
        far: list[str] = []
        compared = 0
        for s in samples:
            ref = self.reference.get(self._key(s))
            problem = sample_problem(s, ref)
            where = f"request {s.get('index')} of {s.get('workload')} (repetition {s.get('rep')})"
            if problem is not None:
                (nan if problem.startswith("sampling error") else garbage).append(f"{where}: {problem}")
                continue
            text = s.get("text")
            if s.get("greedy") and ref is not None and text is not None:
                compared += 1
                sim = similarity(text, ref)
                if sim < self.min_similarity:
                    pair = f"{text.strip()[:40]!r} vs {ref.strip()[:40]!r}"
                    far.append(f"{where}: similarity {sim:.2f} to the reference: {pair}")
        n = len(samples)
        if nan:
            return f"wrong output under load: {len(nan)}/{n} sampled requests failed with NaN/inf: {nan[0]}"
        if garbage and len(garbage) >= max(1, MAX_GARBAGE_SHARE * n):
            return f"wrong output under load: {len(garbage)}/{n} sampled requests are garbage: {garbage[0]}"
        if compared and len(far) > MAX_DISAGREEING_SHARE * compared:
            return (
                f"wrong output under load: {len(far)}/{compared} greedy outputs disagree with the "
                f"reference config: {far[0]}"
            )
        for s in samples:
            if s.get("ok") and s.get("text") is not None:
                self.reference.setdefault(self._key(s), str(s["text"]))
        return None
