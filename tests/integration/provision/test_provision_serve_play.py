"""provision.yml's serve play, as `ansible-playbook --list-hosts` reads it: it runs on the
provisioned hosts, and only with provision_serve (the CLI's `--serve` wiring is in
tests/unit/provision/test_provision_serve_option.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from bwtune import ansible_run

REPO = Path(__file__).resolve().parents[3]


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
