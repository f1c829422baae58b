"""`bwtune promote` of a simulated run to a simulated local host (the demo's case, issue 20 #2).

This machine has no systemd as PID 1, like the demo's controller: `--check` says what it
would write and writes nothing; a real promotion fails at the unit's restart and, as the host
ran no config before, removes again everything it made (files, folders, user, group), with a
message whose first line is whole. Every path is under the test's tmp dir; the user and group
have names of their own (removed at the end whatever happens).
"""

from __future__ import annotations

import grp
import json
import pwd
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import exit_codes, results_db
from bwtune.analysis.hardware_group import HardwareGroup
from tests.integration.cli.conftest import bwtune_argv

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUN = "promote-local-1"
PRESENT = ("etc/systemd/system", "var/lib", "var/cache")
PRESENT_DIRS = ("etc", "etc/systemd", "etc/systemd/system", "var", "var/lib", "var/cache")


def exists(kind: str, name: str) -> bool:
    try:
        (pwd.getpwnam if kind == "user" else grp.getgrnam)(name)
    except KeyError:
        return False
    return True


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Any]:
    name = "bwt-" + uuid.uuid4().hex[:8]
    root = tmp_path / "node"
    where = {
        "server_config_dir": str(root / "etc" / "bwtune" / "server"),
        "server_state_dir": str(root / "var" / "lib" / name),
        "server_cache_dir": str(root / "var" / "cache" / name),
        "server_unit_dir": str(root / "etc" / "systemd" / "system"),
        "server_unit_name": name,
        "server_user": name,
        "server_group": name,
        "server_health_timeout_s": 5,
    }
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "bwtune_simulated": True,
        "bwtune_stack_python": sys.executable,
        "bwtune_model_path": str(
            Path(__file__).parents[2] / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
        ),
        **where,
    }
    # What a host has before the role: /etc/systemd/system, /var/lib, /var/cache.
    for there in PRESENT:
        (root / there).mkdir(parents=True)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node": host}}}))
    yield {"inventory": inventory, "name": name, "root": root, **where}
    for tool, kind in (("userdel", "user"), ("groupdel", "group")):
        if exists(kind, name):
            subprocess.run([tool, name], check=False)


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        bwtune_argv(*args), capture_output=True, text=True, env=env, timeout=600, check=False
    )


@pytest.fixture
def db(tmp_path: Path, node: dict[str, Any], cli_env: dict[str, str]) -> Path:
    """A simulated run measured on this host's hardware group (as `bwtune facts` reads it)."""
    done = run_cli(cli_env, "facts", "-i", str(node["inventory"]), "--json")
    assert done.returncode == 0, done.stderr
    group = HardwareGroup.of_facts(json.loads(done.stdout)["hosts"]["node"])
    assert not group.missing(), group
    block = {"n": 1, "values": {"output_throughput": 100.0}, "repetitions": [{"output_throughput": 100.0}]}
    path = tmp_path / "results.db"
    conn = results_db.connect(path)
    results_db.record_run(
        conn, RUN, objective={"workload": "chat", "metric": "output_throughput", "goal": "max"}
    )
    results_db.import_results(
        conn,
        [
            contract.make_line(
                run_id=RUN,
                host="sweep-node",
                config_id="csim0000001",
                status="ok",
                flags={"tp-size": 8},
                argv=[
                    "--model-path",
                    "/m",
                    "--tp-size",
                    "8",
                    "--served-model-name",
                    "${BWTUNE_SERVER_API_KEY}",
                ],
                metrics={"chat": block},
                simulated=True,
                gpu=group.sm,
                stack_fingerprint=group.stack_fingerprint,
            )
        ],
    )
    conn.close()
    return path


def made(node: dict[str, Any]) -> list[str]:
    """What is on the node of the role's: every file under the node's root, the user, the group."""
    found = [str(p.relative_to(node["root"])) for p in sorted(node["root"].rglob("*"))]
    found = [p for p in found if p not in PRESENT_DIRS]
    return found + [kind for kind in ("user", "group") if exists(kind, node["name"])]


def test_check_says_what_it_would_write_and_writes_nothing(
    node: dict[str, Any], db: Path, cli_env: dict[str, str]
) -> None:
    done = run_cli(
        cli_env, "promote", RUN, "-i", str(node["inventory"]), "--db", str(db), "--check", "--json"
    )
    assert done.returncode == exit_codes.OK, done.stderr
    out = json.loads(done.stdout)
    assert out["check"] is True
    host = out["hosts"]["node"]
    assert host["status"] == "would change", host
    would = host["would"]
    unit = f"{node['server_unit_dir']}/{node['name']}.service"
    assert would["unit"] == unit
    assert set(would["writes"]) >= {unit, node["server_config_dir"] + "/config.json"}
    assert f"user {node['name']}" in would["creates"] and node["server_state_dir"] in would["creates"]
    # A simulated host serves the stand-in; the key is in a file; a `$` word stays a literal.
    assert (
        '"-m" "bwtune.standin"' in would["exec_start"] and "sglang.launch_server" not in would["exec_start"]
    )
    assert would["exec_start"].endswith(f'"--config" "{node["server_config_dir"]}/api-key.yaml"')
    assert '"--served-model-name" "$${BWTUNE_SERVER_API_KEY}"' in would["exec_start"]
    assert made(node) == []

    text = run_cli(cli_env, "promote", RUN, "-i", str(node["inventory"]), "--db", str(db), "--check")
    assert text.returncode == exit_codes.OK, text.stderr
    assert "node: would change --" in text.stdout and "--tp-size unset -> 8" in text.stdout
    assert f"  unit {unit}: ExecStart=" in text.stdout
    assert made(node) == []


def test_a_first_promotion_that_fails_removes_what_it_made_and_says_so_whole(
    node: dict[str, Any], db: Path, cli_env: dict[str, str]
) -> None:
    done = run_cli(cli_env, "promote", RUN, "-i", str(node["inventory"]), "--db", str(db))
    assert done.returncode == exit_codes.HOST_FAILED, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("bwtune: host node")]
    assert len(errors) == 1, done.stderr
    head = (
        "bwtune: host node failed: promotion failed, no previous config to roll back to; "
        "removed what it made ("
    )
    assert errors[0].startswith(head), errors[0]
    removed, _, why = errors[0][len(head) :].partition("): ")
    assert "\\n" not in errors[0], errors[0]  # no escaped line break inside the line
    assert removed == f"9 files and folders, user {node['name']}, group {node['name']}", errors[0]
    # The failure's own first line, after the outcome: here the unit's restart, without systemd.
    assert "systemd" in why or "daemon" in why or "unit" in why, errors[0]
    assert made(node) == []
