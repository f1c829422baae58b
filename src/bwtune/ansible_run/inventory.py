"""An inventory as Ansible reads it (ansible-inventory), checked before anything runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bwtune.ansible_run.console_scripts import bwtune_bin
from bwtune.ansible_run.events import ANSI


class InventoryError(ValueError):
    """The inventory path is missing or Ansible cannot parse it (bad input, exit 2)."""


@dataclass(frozen=True)
class Inventory:
    """An inventory as Ansible reads it: its path and every host with its variables."""

    path: Path
    hostvars: dict[str, dict[str, Any]]

    @property
    def hosts(self) -> list[str]:
        return sorted(self.hostvars)

    def simulated(self, host: str) -> bool:
        return _truthy(self.hostvars.get(host, {}).get("bwtune_simulated"))


def load_inventory(path: str | os.PathLike[str], limit: str | None = None) -> Inventory:
    """Parse an inventory with Ansible (ansible-inventory) before anything runs.

    Raises InventoryError with one line naming the path and Ansible's reason.
    """
    source = Path(path).expanduser()
    if not source.exists():
        raise InventoryError(f"inventory {path}: no such file or directory")
    argv = [bwtune_bin("ansible-inventory"), "-i", str(source.resolve()), "--list"]
    if limit:
        argv += ["--limit", limit]
    env = {**os.environ, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True", "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise InventoryError(f"inventory {path}: {inventory_reason(proc.stderr, source)}")
    listing = json.loads(proc.stdout)
    hostvars: dict[str, dict[str, Any]] = dict(listing.get("_meta", {}).get("hostvars", {}))
    for host in _all_hosts(listing, "all"):
        hostvars.setdefault(host, {})
    if not hostvars:
        where = f" matching --limit {limit!r}" if limit else ""
        raise InventoryError(f"inventory {path}: no hosts{where}")
    return Inventory(source.resolve(), hostvars)


def inventory_reason(stderr: str, source: Path) -> str:
    """Why ansible-inventory could not read `source`, in one line: the plugin its name
    asks for first (yaml for .yml, else ini), not the first of every plugin tried."""
    text = ANSI.sub("", stderr)
    plugin = "yaml" if source.suffix in (".yml", ".yaml") else "ini"
    failures = re.findall(r"Failed to parse inventory with '([\w.]+)' plugin: (.*)", text)
    for name, reason in failures:
        if name == plugin:
            return f"cannot be parsed as {name}: {reason.strip()}"
    if failures:
        return f"cannot be parsed as {failures[0][0]}: {failures[0][1].strip()}"
    errors = re.findall(r"\[ERROR\]: (.*)", text)
    return errors[-1].strip() if errors else (text.strip().splitlines() or ["cannot be parsed"])[-1]


def _all_hosts(listing: Mapping[str, Any], group: str, seen: set[str] | None = None) -> Iterator[str]:
    seen = seen if seen is not None else set()
    if group in seen:
        return
    seen.add(group)
    entry = listing.get(group) or {}
    yield from entry.get("hosts", [])
    for child in entry.get("children", []):
        yield from _all_hosts(listing, child, seen)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
