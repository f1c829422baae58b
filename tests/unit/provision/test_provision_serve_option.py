"""`bwtune provision --serve` asks provision.yml for the checkpoint and server too, and wins
over a user's `-e provision_serve=...`; without it the playbook builds only."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from bwtune import ansible_run, cli, exit_codes
from bwtune.commands import provision

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def load_inventory(path: str, limit: str | None = None) -> ansible_run.Inventory:
        return ansible_run.Inventory(Path(path), {"node": {}})

    def run_playbook(name: str, inventory: Any, extravars: Any, **kw: Any) -> ansible_run.PlaybookRun:
        seen.append({"playbook": name, "extra_args": list(kw.get("extra_args") or [])})
        done = ansible_run.PlaybookRun(playbook=Path(name), private_data_dir=Path("/nonexistent"), ident="x")
        done.rc = 0
        return done

    monkeypatch.setattr(ansible_run, "load_inventory", load_inventory)
    monkeypatch.setattr(ansible_run, "run_playbook", run_playbook)
    return seen


def serve_value(extra_args: list[str]) -> Any:
    """provision_serve as ansible-playbook resolves repeated -e: the last one wins."""
    value = None
    for flag, arg in itertools.pairwise(extra_args):
        if flag == "-e" and arg.startswith("{") and "provision_serve" in arg:
            value = json.loads(arg)["provision_serve"]
        elif flag == "-e" and arg.startswith("provision_serve="):
            value = arg.split("=", 1)[1]
    return value


def test_serve_sets_provision_serve_last(calls: list[dict[str, Any]]) -> None:
    args = ["provision", "-i", "inv.yml", "-e", "provision_serve=false", "--serve", "--json"]
    assert cli.main(args) == exit_codes.OK
    assert calls[0]["playbook"] == provision.PROVISION_PLAYBOOK
    assert serve_value(calls[0]["extra_args"]) is True


def test_without_serve_the_playbook_builds_only(calls: list[dict[str, Any]]) -> None:
    assert cli.main(["provision", "-i", "inv.yml", "--check"]) == exit_codes.OK
    assert serve_value(calls[0]["extra_args"]) is None
    assert "--check" in calls[0]["extra_args"]
