"""The stand-in does not borrow the code it is meant to test: not the planner's rules (its
refusals are real SGLang's recorded verdicts) and not the gate's prompts (it answers from a
general knowledge of arithmetic, counting and facts)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from ansible_collections.bwtune.sglang.plugins.module_utils._bench.correctness_prompts import PROMPTS
from bwtune.standin.textgen import answer

STANDIN = Path(__file__).resolve().parents[3] / "src" / "bwtune" / "standin"
FORBIDDEN = ("rules", "planner", "correctness_prompts")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_no_module_of_the_standin_imports_the_planner_rules_or_the_gate_prompts():
    sources = sorted(STANDIN.rglob("*.py"))
    assert len(sources) > 10
    for path in sources:
        bad = {m for m in imported_modules(path) if m.rsplit(".", 1)[-1] in FORBIDDEN}
        assert not bad, f"{path.name} imports {bad}"
    # and running it loads none of them (no import hidden behind a string or a plugin)
    code = (
        "import sys, bwtune.standin.__main__, bwtune.standin.app, bwtune.standin.textgen; "
        f"print(sorted(m for m in sys.modules if m.rsplit('.', 1)[-1] in {FORBIDDEN!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_gate_prompts_are_nowhere_in_the_standin():
    text = "\n".join(p.read_text() for p in STANDIN.rglob("*.py"))
    for prompt in PROMPTS:
        assert prompt.prompt not in text and prompt.prompt.lower() not in text.lower(), prompt.name


def test_answers_come_from_general_knowledge():
    # The gate's prompts are answered because the knowledge covers them...
    for prompt in PROMPTS:
        assert prompt.is_correct(answer(prompt.prompt) or ""), prompt.name
    # ...and so is anything else of the same kind, worded otherwise.
    assert answer("What is 6*7?") == "42"
    assert answer("Please calculate 100 - 58.") == "42"
    assert answer("The capital of Italy is") == " Rome"
    assert answer("What is the capital of Japan?") == "Tokyo"
    assert answer("The chemical symbol for silver is") == " Ag"
    assert answer("Count from 7 to 10.") == "7 8 9 10"
    assert answer("<|im_start|>user\nWhat is 9+10?<|im_end|>\n<|im_start|>assistant\n") == "19"
    # Nothing known: no answer (the server then streams filler), and no made-up facts.
    assert answer("Write a haiku about GPUs.") is None
    assert answer("The capital of Atlantis is") is None
    assert answer("Release 2026-01-05 notes") is None
