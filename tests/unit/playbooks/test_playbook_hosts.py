"""Every playbook picks its hosts with one variable named after it (`<playbook>_hosts`),
defaulting to `all`, and docs/variables.md lists it: one vocabulary, no `bwtune_*_hosts`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "variables.md"
# The controller-side playbook runs on localhost by design (it runs `bwtune regress`).
LOCAL = {"regress.yml"}
HOSTS = re.compile(r"^\{\{ (\w+) \| default\('all'\) \}\}$")


def plays() -> list[tuple[str, str]]:
    found = []
    for path in sorted((REPO / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            if "hosts" in play:
                found.append((path.name, str(play["hosts"])))
    return found


def test_there_are_playbooks_to_check() -> None:
    assert {"provision.yml", "serve.yml", "promote.yml", "sweep.yml"} <= {name for name, _ in plays()}


@pytest.mark.parametrize(("playbook", "hosts"), plays(), ids=lambda v: v if v.endswith(".yml") else "")
def test_the_hosts_variable_is_named_after_the_playbook_and_documented(playbook: str, hosts: str) -> None:
    if playbook in LOCAL:
        assert hosts == "localhost"
        return
    match = HOSTS.match(hosts)
    assert match, f"playbooks/{playbook}: hosts {hosts!r} is not {{{{ <name>_hosts | default('all') }}}}"
    variable = match.group(1)
    assert variable == playbook.split("_")[0].removesuffix(".yml") + "_hosts", (
        f"playbooks/{playbook}: {variable}"
    )
    table = DOC.read_text(encoding="utf-8").split("## Playbook variables")[1].split("\n## ")[0]
    row = re.search(rf"^\| `{variable}` \| ([^|]*)\|", table, re.MULTILINE)
    assert row and f"`{playbook}`" in row.group(1), f"{variable} ({playbook}) is not in docs/variables.md"
