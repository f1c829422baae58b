#!/usr/bin/env python3
"""Molecule's inventory for the scenarios on test hosts: the hosts testhosts.sh booted.

Linked as the scenario's `hosts` inventory (molecule.yml: provisioner.inventory.links).
It reads $TESTHOSTS_DIR/inventory.yml, which scripts/testhosts/testhosts.sh writes on `up`
and removes on `down`; before `up` (molecule's first destroy, create) the group is empty,
so the same file serves every step and the hosts' addresses are never written by hand.
"""

import json
import os
import sys
from pathlib import Path

import yaml


def inventory() -> dict:
    found = {"_meta": {"hostvars": {}}, "all": {"children": ["testhosts"]}, "testhosts": {"hosts": [], "vars": {}}}
    state = os.environ.get("TESTHOSTS_DIR")
    path = Path(state, "inventory.yml") if state else None
    if path is None or not path.is_file():
        return found
    group = yaml.safe_load(path.read_text())["all"]["children"]["testhosts"]
    for name, hostvars in (group.get("hosts") or {}).items():
        found["testhosts"]["hosts"].append(name)
        found["_meta"]["hostvars"][name] = hostvars or {}
    found["testhosts"]["vars"] = group.get("vars") or {}
    return found


if __name__ == "__main__":
    if "--host" in sys.argv:
        print("{}")
    else:
        print(json.dumps(inventory()))
