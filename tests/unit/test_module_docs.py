"""Every module's DOCUMENTATION, EXAMPLES and RETURN (and each filter's .yml) are valid YAML (ansible-doc and
ansible-test sanity read them; a `: ` in a plain scalar broke sweep_progress's)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

MODULES = sorted((Path(__file__).resolve().parents[2] / "plugins" / "modules").glob("*.py"))


def doc_strings(path: Path) -> dict[str, str]:
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("DOCUMENTATION", "EXAMPLES", "RETURN") and isinstance(node.value, ast.Constant):
                found[name] = node.value.value
    return found


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_module_docs_are_valid_yaml(path: Path) -> None:
    docs = doc_strings(path)
    assert sorted(docs) == ["DOCUMENTATION", "EXAMPLES", "RETURN"], path.name
    for name, text in docs.items():
        try:
            yaml.safe_load(text)
        except yaml.YAMLError as exc:
            pytest.fail(f"{path.name}: {name} is not valid YAML: {exc}")
    documentation = yaml.safe_load(docs["DOCUMENTATION"])
    assert documentation["module"] == path.stem
    for option, spec in (documentation.get("options") or {}).items():
        assert "description" in spec and "type" in spec, f"{path.name}: option {option}"


FILTER_DOCS = sorted((Path(__file__).resolve().parents[2] / "plugins" / "filter").glob("*.yml"))


@pytest.mark.parametrize("path", FILTER_DOCS, ids=[p.stem for p in FILTER_DOCS])
def test_filter_docs_are_valid_yaml(path: Path) -> None:
    try:
        docs = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        pytest.fail(f"{path.name} is not valid YAML: {exc}")
    assert docs["DOCUMENTATION"]["name"] == path.stem
    assert {"EXAMPLES", "RETURN"} <= set(docs), path.name
