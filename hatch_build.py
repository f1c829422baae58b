"""Ship the Ansible collection bwtune.sglang inside the bwtune wheel.

The repo root is both the Python package (src/bwtune) and the collection. ansible-core
finds a collection under site-packages/ansible_collections/<ns>/<name>/ with no
configuration, so the wheel carries one there.

Normal builds (wheel, sdist -> wheel): the collection's files are found by walking the
tree with galaxy.yml's own build_ignore (the rule `ansible-galaxy collection build` applies),
so the wheel and the galaxy tarball ship the same collection, whatever folders exist today
(roles/ or molecule/ may or may not be there); galaxy.yml is kept too (the tarball turns it
into MANIFEST.json).

Editable builds: hatchling would copy those files, so edits would go stale. Instead link
build/dev-collections/ansible_collections/bwtune/sglang -> the repo root and put
build/dev-collections on sys.path with a .pth file; ansible-core then finds the live
collection, new files included.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any

import yaml
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# What ansible-galaxy always leaves out (ansible/galaxy/collection/__init__.py,
# _build_files_manifest_walk), before galaxy.yml's build_ignore.
GALAXY_IGNORE_DIRS = frozenset({"CVS", ".bzr", ".hg", ".git", ".svn", "__pycache__", ".tox"})
GALAXY_IGNORE_PATTERNS = (
    "MANIFEST.json", "FILES.json", "galaxy.yaml", ".git", "*.pyc", "*.retry", "tests/output",
)  # fmt: skip


def collection_files(root: Path) -> dict[str, str]:
    """{source path: path in the wheel} for every file the galaxy tarball would ship."""
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text())
    ns, name = galaxy["namespace"], galaxy["name"]
    patterns = [*GALAXY_IGNORE_PATTERNS, f"{ns}-{name}-*.tar.gz", *(galaxy.get("build_ignore") or [])]
    dest = f"ansible_collections/{ns}/{name}"
    files = {str(root / "galaxy.yml"): f"{dest}/galaxy.yml"}
    # Built from an sdist, the root also holds the sdist's own metadata: not the collection's.
    own = {"galaxy.yml", "PKG-INFO"} if (root / "PKG-INFO").is_file() else {"galaxy.yml"}

    def ignored(rel: str) -> bool:
        return any(fnmatch.fnmatch(rel, p) for p in patterns)

    def walk(directory: Path) -> None:
        for entry in sorted(directory.iterdir()):
            rel = entry.relative_to(root).as_posix()
            if entry.is_dir():
                if entry.name in GALAXY_IGNORE_DIRS or ignored(rel):
                    continue
                # ansible-galaxy keeps a linked directory as a link; a wheel cannot: skip it.
                if not entry.is_symlink():
                    walk(entry)
            elif entry.is_file() and not ignored(rel) and rel not in own:
                files[str(entry)] = f"{dest}/{rel}"

    walk(root)
    return files


class CollectionHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        if version != "editable":
            build_data["force_include"].update(collection_files(root))
            return
        dev = root / "build" / "dev-collections"
        link = dev / "ansible_collections" / "bwtune" / "sglang"
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(root, link, target_is_directory=True)
        pth = dev.parent / "bwtune-dev-collections.pth"
        pth.write_text(f"{dev}\n")
        build_data["force_include_editable"] = {str(pth): "bwtune-dev-collections.pth"}
