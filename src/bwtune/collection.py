"""Where the installed bwtune.sglang collection lives (node-side logic is imported from it)."""

from __future__ import annotations

from pathlib import Path

import ansible_collections.bwtune.sglang as _collection


def collection_root() -> Path:
    """The directory of the bwtune.sglang collection (the repo root in a dev install)."""
    return Path(next(iter(_collection.__path__))).resolve()


def playbook(name: str) -> Path:
    return collection_root() / "playbooks" / name
