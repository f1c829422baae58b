"""Every plugin's `version_added` is a release the collection has reached (issue 22): a
0.1.0 collection has no plugin "added in 0.2.0"."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
ADDED = re.compile(r"""^\s*version_added:\s*["']?([0-9][0-9.]*)["']?\s*$""", re.MULTILINE)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_no_plugin_is_added_after_the_collections_version() -> None:
    collection = yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))["version"]
    found = {
        f"{path.relative_to(REPO)}: {added}"
        for path in sorted((REPO / "plugins").rglob("*"))
        if path.suffix in (".py", ".yml", ".yaml") and "__pycache__" not in path.parts
        for added in ADDED.findall(path.read_text(encoding="utf-8"))
    }
    assert any(line.startswith("plugins/modules/sweep.py") for line in found)  # the pattern reads them
    assert sorted(line for line in found if _version(line.rsplit(" ", 1)[1]) > _version(collection)) == []
