"""Editable installs: make the working tree itself the installed collection.

Hatchling's default editable wheel copies force-included files, so edits to
plugins/ or roles/ would go stale. For editable builds only, link
build/dev-collections/ansible_collections/bwtune/sglang -> the repo root and
put build/dev-collections on sys.path with a .pth file; ansible-core then
finds the live collection, new files included.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class DevCollectionHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version != "editable":
            return
        root = Path(self.root)
        dev = root / "build" / "dev-collections"
        link = dev / "ansible_collections" / "bwtune" / "sglang"
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(root, link, target_is_directory=True)
        # The collection is served from the link, not copied into the wheel.
        build_data["force_include"] = {}
        pth = dev.parent / "bwtune-dev-collections.pth"
        pth.write_text(f"{dev}\n")
        build_data["force_include_editable"] = {str(pth): "bwtune-dev-collections.pth"}
