"""`bwtune provision --serve` asks provision.yml for the checkpoint and server too, and wins
over a user's `-e provision_serve=...`; without it the playbook builds only."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

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


def listed_hosts(tmp_path: Path, *extra: str) -> dict[str, list[str]]:
    """play name -> its hosts, from ansible-playbook --list-hosts."""
    inventory = tmp_path / "inventory.yml"
    local = {"ansible_connection": "local"}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"a": local, "b": local}}}))
    cmd = [ansible_run.bwtune_bin("ansible-playbook"), "-i", str(inventory), "--list-hosts", *extra]
    done = subprocess.run([*cmd, str(REPO / "playbooks" / "provision.yml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    plays: dict[str, list[str]] = {}
    for block in done.stdout.split("play #")[1:]:
        name = block.split(": ", 1)[1].split("\t")[0]
        plays[name] = block.split("):", 2)[-1].split() if "hosts (0)" not in block else []
    return plays


@pytest.mark.integration  # ansible-playbook --list-hosts
@pytest.mark.parametrize(
    ("extra", "served"),
    [
        ((), []),
        (("-e", "provision_serve=true"), ["a", "b"]),
        (("-e", "provision_serve=true", "-e", "provision_hosts=b"), ["b"]),
    ],
    ids=["build-only", "serve", "serve-provision-hosts"],
)
def test_the_serve_play_runs_on_the_provisioned_hosts_only_with_provision_serve(
    tmp_path: Path, extra: tuple[str, ...], served: list[str]
) -> None:
    plays = listed_hosts(tmp_path, *extra)
    assert list(plays) == ["Build and verify the SGLang stack", "Serve SGLang"]
    assert sorted(plays["Serve SGLang"]) == served  # --list-hosts does not keep inventory order
