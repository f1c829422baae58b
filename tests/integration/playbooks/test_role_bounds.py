"""A role's numeric variable out of its range fails the role's first task, in one line, before
anything else runs (issue 21 #9): the server role, both entry points, as `ansible-playbook` runs it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_BIN = Path(sys.executable).parent
_FATAL = re.compile(r"^fatal: \[localhost\]: FAILED! => (\{.*\})$", re.MULTILINE)
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Run the server role's entry point
      ansible.builtin.include_role:
        name: bwtune.sglang.server
        tasks_from: "{{ entry }}"
"""


def run(
    tmp_path: Path, entry: str, variables: dict[str, object], *args: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        PATH=str(ANSIBLE_BIN) + os.pathsep + env.get("PATH", ""),
        ANSIBLE_HOME=str(tmp_path / "ansible"),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible" / "tmp"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="False",
    )
    play = tmp_path / "play.yml"
    play.write_text(PLAY, encoding="utf-8")
    node = tmp_path / "node"
    where = {
        "ansible_python_interpreter": sys.executable,
        "server_unit_dir": str(node / "units"),
        "server_config_dir": str(node / "config"),
        "server_state_dir": str(node / "state"),
        "server_cache_dir": str(node / "cache"),
        "server_python": sys.executable,
    }
    argv = [str(ANSIBLE_BIN / "ansible-playbook"), "-i", "localhost,", str(play)]
    argv += ["-e", json.dumps({**where, **variables, "entry": entry}), *args]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_out_of_range_server_variables_fail_in_one_line_before_anything_runs(tmp_path: Path) -> None:
    bad = {
        "server_port": 70000,
        "server_health_timeout_s": 0,
        "server_journal_lines": "0",  # a string the argument specs accept as an int
        "server_router_prometheus_port": -1,
    }
    for entry, mode in (("main", []), ("router", ["--check"])):
        done = run(tmp_path, entry, bad, *mode)
        assert done.returncode == 2, done.stdout[-4000:] + done.stderr[-2000:]
        found = _FATAL.findall(done.stdout)
        assert len(found) == 1, done.stdout[-4000:]
        message = json.loads(found[0])["msg"]
        assert message == (
            "server_port: 70000 is out of range (1-65535: the server's port); "
            "server_health_timeout_s: 0 is out of range (more than 0: seconds to wait for /health_generate); "
            "server_journal_lines: 0 is out of range (at least 1: journal lines shown); "
            "server_router_prometheus_port: -1 is out of range (1-65535: the router's metrics port)"
        ), entry
        tasks = re.findall(r"^TASK \[(.*?)\]", done.stdout, re.MULTILINE)
        assert tasks[1:] == [
            f"bwtune.sglang.server : Validating arguments against arg spec '{entry}' - "
            + yaml.safe_load((REPO / "roles/server/meta/argument_specs.yml").read_text())["argument_specs"][
                entry
            ]["short_description"],
            "bwtune.sglang.server : Check the numeric variables' ranges before anything runs",
        ], tasks
        assert re.search(r"^localhost\s+: ok=\d+\s+changed=0\s", done.stdout, re.MULTILINE), done.stdout[
            -2000:
        ]
        assert not (tmp_path / "node").exists()


def test_in_range_values_pass_the_check_and_it_reports_skipped(tmp_path: Path) -> None:
    # Ports at their limits, a string number: the check is skipped (never changed), the next
    # task runs (here it stops at the unreachable router workers: none are configured).
    good = {"server_port": 65535, "server_router_port": "1", "server_health_timeout_s": 1}
    done = run(tmp_path, "router", good, "--check")
    check = done.stdout.index(
        "TASK [bwtune.sglang.server : Check the numeric variables' ranges before anything runs]"
    )
    after = done.stdout[check:]
    assert re.match(r"TASK \[[^\]]*\] \**\nskipping: \[localhost\]", after), after[:1000]
    assert "out of range" not in done.stdout
    assert "the router needs at least one worker" in after
