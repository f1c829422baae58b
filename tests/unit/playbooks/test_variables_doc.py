"""docs/variables.md documents every role variable, and the cross-role vocabulary is one list.

Roles that other engineers add are held to it: a variable in any roles/*/meta/argument_specs.yml
that docs/variables.md does not list fails here (`scripts/gen_variables_doc.py` writes the
role sections).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import vocabulary

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "variables.md"


def role_options() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path in sorted(REPO.glob("roles/*/meta/argument_specs.y*ml")):
        role = path.parents[1].name
        specs = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("argument_specs") or {}
        for spec in specs.values():
            for name, option in (spec.get("options") or {}).items():
                found.append((role, name, option or {}))
    return found


def role_section(role: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.find(f"### Role `{role}`")
    assert start >= 0, f"docs/variables.md has no section for role {role}: run scripts/gen_variables_doc.py"
    end = text.find("\n### ", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_there_are_roles_to_check() -> None:
    roles = {role for role, _, _ in role_options()}
    assert {"sweep", "facts"} <= roles


@pytest.mark.parametrize(
    ("role", "name", "option"), role_options(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_role_variable_is_in_its_roles_section(role: str, name: str, option: dict[str, Any]) -> None:
    row = re.search(rf"^\| `{re.escape(name)}` \| ([^|]*)\|", role_section(role), re.MULTILINE)
    assert row, (
        f"{name} (roles/{role}/meta/argument_specs.yml) is not in docs/variables.md: "
        "run scripts/gen_variables_doc.py"
    )
    assert row.group(1).startswith(str(option.get("type", "str"))), f"{name}: the doc gives another type"


@pytest.mark.parametrize(
    ("role", "name", "option"), role_options(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_role_variables_are_prefixed_or_cross_role(role: str, name: str, option: dict[str, Any]) -> None:
    if name.startswith(f"{role}_"):
        return
    assert name in vocabulary.CROSS_ROLE, (
        f"roles/{role}: {name} is neither {role}_* nor a cross-role variable of docs/variables.md"
    )
    if "default" in option:
        documented = vocabulary.value(name, lambda _: None) if name != "bwtune_nvidia_smi" else "nvidia-smi"
        assert option["default"] == documented, (
            f"roles/{role}: {name} has another default than the vocabulary"
        )


@pytest.mark.parametrize("name", list(vocabulary.CROSS_ROLE))
def test_every_cross_role_variable_is_in_the_vocabulary_table_with_its_default(name: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("## Cross-role variables") : text.index("## Playbook variables")]
    row = re.search(rf"^\| `{name}` \| ([^|]*) \|", table, re.MULTILINE)
    assert row, f"{name} is not in the cross-role table of docs/variables.md"
    default = vocabulary.CROSS_ROLE[name]
    if default is None:
        assert row.group(1) == "none"
    else:
        assert row.group(1) == f"`{str(default).lower() if isinstance(default, bool) else default}`"


@pytest.mark.parametrize("role", ["sweep", "facts"])
def test_the_role_readme_lists_every_variable_of_the_role(role: str) -> None:
    readme = (REPO / "roles" / role / "README.md").read_text(encoding="utf-8")
    missing = [name for r, name, _ in role_options() if r == role and f"`{name}`" not in readme]
    assert missing == [], f"roles/{role}/README.md does not list {missing}"
