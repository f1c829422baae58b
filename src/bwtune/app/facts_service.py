"""The facts service: the playbook that gathers each host's GPU, stack and checkpoint facts,
and the reading of what it returned (`bwtune facts`, `promote` and `recipe` use both)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bwtune import ansible_run

FACTS_PLAYBOOK = "facts.yml"


def host_facts(outcome: ansible_run.PlaybookRun) -> dict[str, dict[str, Any]]:
    """host -> the merged `ansible_facts` the collection's *_facts modules returned."""
    merged: dict[str, dict[str, Any]] = {}
    for event in outcome.ok:
        if not event.host or not (event.action or "").endswith("_facts"):
            continue
        found = event.res.get("ansible_facts")
        if isinstance(found, Mapping):
            merged.setdefault(event.host, {}).update(found)
    return merged
