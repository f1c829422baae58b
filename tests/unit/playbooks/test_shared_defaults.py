"""The cross-role defaults (the stack root, the stack's Python, the model path, ...) live once.

vocabulary.CROSS_ROLE is the one place (docs/variables.md shows it); roles read those
variables through the ``bwtune.sglang.node_var`` lookup. No role may write one of those
defaults itself (``/opt/bwtune/stacks`` in a role default drifted from the shared one), nor
give a cross-role variable a value of its own with ``| default(...)``; the one place a role
may repeat a default is its meta/argument_specs.yml entry for that very variable, which
test_variables_doc.py holds to the vocabulary.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import vocabulary

REPO = Path(__file__).resolve().parents[3]
ROLE_FILES = sorted(
    p for p in (REPO / "roles").rglob("*") if p.is_file() and p.suffix in (".yml", ".yaml", ".j2")
)
# The defaults that are paths (a role that writes one of these has a copy of the default).
LITERALS = {
    name: str(vocabulary.value(name, lambda _: None))
    for name in ("bwtune_stack_root", "bwtune_stack_python", "bwtune_model_path")
}
# `bwtune_x | default(...)`: a default of the role's own. `default(omit...)` (pass nothing
# when unset) gives none; an empty-string fallback (default('', true)) of a check neither.
# bwtune_run_id is left out: it has no default (unset, each role says what it does instead).
WITH_DEFAULTS = sorted(name for name, default in vocabulary.CROSS_ROLE.items() if default is not None)
OWN_DEFAULT = re.compile(r"\b(" + "|".join(WITH_DEFAULTS) + r")\s*\|\s*default\((?!omit\b|''\s*,\s*true\))")


def without_cross_role_specs(data: Any) -> Any:
    """An argument_specs document less its entries for cross-role variables."""
    if isinstance(data, dict):
        return {k: without_cross_role_specs(v) for k, v in data.items() if k not in vocabulary.CROSS_ROLE}
    if isinstance(data, list):
        return [without_cross_role_specs(v) for v in data]
    return data


def role_text(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if path.parts[-2:] == ("meta", path.name) and path.stem == "argument_specs":
        return yaml.safe_dump(without_cross_role_specs(yaml.safe_load(text)), width=10_000)
    # Comments may name the default (README-like prose); the values may not.
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def test_there_are_role_files_to_check() -> None:
    assert len(ROLE_FILES) > 20
    assert LITERALS["bwtune_stack_root"] == "/opt/bwtune/stacks"


@pytest.mark.parametrize("path", ROLE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_role_hard_codes_a_cross_role_default(path: Path) -> None:
    text = role_text(path)
    for name, literal in LITERALS.items():
        assert literal not in text, (
            f"{path.relative_to(REPO)}: hard-codes {literal} (the default of {name}): read "
            f"lookup('bwtune.sglang.node_var', '{name}') instead"
        )


@pytest.mark.parametrize("path", ROLE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_role_gives_a_cross_role_variable_a_default_of_its_own(path: Path) -> None:
    found = OWN_DEFAULT.findall(role_text(path))
    assert not found, (
        f"{path.relative_to(REPO)}: {', '.join(sorted(set(found)))} | default(...): "
        "a cross-role default lives in vocabulary.CROSS_ROLE; use the bwtune.sglang.node_var lookup"
    )


def test_the_checks_catch_a_hard_coded_root() -> None:
    drifted = (
        "server_python: \"{{ bwtune_stack_python | default('/opt/bwtune/stacks/current/bin/python') }}\""
    )
    assert OWN_DEFAULT.findall(drifted) == ["bwtune_stack_python"]
    assert LITERALS["bwtune_stack_root"] in drifted
    assert not OWN_DEFAULT.findall('model_path: "{{ bwtune_model_path | default(omit, true) }}"')
