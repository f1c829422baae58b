"""The server role's config step (tasks/config.yml) through real ansible-playbook, two local hosts.

Multi-node rendering: each host of a 2-node group gets its rank by position and the first
host's address. Bad input fails in this step, which runs before anything on the node changes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import yaml

pytestmark = pytest.mark.integration

PLAY = """
- hosts: pair
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: bwtune.sglang.server
        tasks_from: config
"""


def resolve(tmp_path: Path, extra: dict[str, Any]) -> tuple[int, dict[str, dict[str, Any]]]:
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {
        "all": {
            "children": {
                "pair": {
                    "hosts": {
                        "node-b": {**local, "ansible_host": "10.9.0.2"},
                        "node-a": {**local, "ansible_host": "10.9.0.1"},
                    }
                }
            }
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "runner").mkdir()
    variables = {
        "bwtune_model_path": "/models/q",
        "server_launch_command": ["/opt/py", "-m", "sglang.launch_server"],
        "server_config_dir": str(tmp_path / "etc"),
        **extra,
    }
    done = ansible_runner.run(
        private_data_dir=str(tmp_path / "runner"),
        playbook=str(tmp_path / "play.yml"),
        inventory=str(tmp_path / "inventory.yml"),
        extravars=variables,
        quiet=True,
        envvars={"PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")},
    )
    resolved: dict[str, dict[str, Any]] = {}
    for event in done.events:
        data = event.get("event_data", {})
        if event.get("event") in ("runner_on_ok", "runner_on_failed") and data.get("task") in (
            "Resolve the config to serve",
            "Check that this host is in its multi-node group",
        ):
            resolved[data["host"]] = data["res"]
    return int(done.rc), resolved


def test_two_node_group_gets_ranks_by_position_and_the_first_hosts_address(tmp_path: Path) -> None:
    rc, resolved = resolve(tmp_path, {"server_multinode_group": "pair", "server_flags": {"tp-size": 16}})
    assert rc == 0, resolved
    # Inventory order is the group's order: node-b was listed first, so it is rank 0.
    for host, rank in (("node-b", "0"), ("node-a", "1")):
        args = resolved[host]["args"]
        assert args[args.index("--nnodes") + 1] == "2"
        assert args[args.index("--node-rank") + 1] == rank
        assert args[args.index("--dist-init-addr") + 1] == "10.9.0.2:20000"
        assert args[:4] == ["--model-path", "/models/q", "--tp-size", "16"]
    assert not (tmp_path / "etc").exists()


def test_bad_flag_fails_naming_it_before_anything_changes(tmp_path: Path) -> None:
    rc, resolved = resolve(tmp_path, {"server_flags": {"TP size": 8}})
    assert rc != 0
    assert all("server_flags: 'TP size' is not a flag name" in r["msg"] for r in resolved.values()), resolved
    assert not (tmp_path / "etc").exists()
