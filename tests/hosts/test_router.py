"""The real sglang-router in front of two data-parallel stand-in servers on two systemd hosts.

sglang-router (PyPI `sglang-router`, a Rust router with a Python launcher; not SGLang's
server, so no stand-in takes its place) is installed from wheels on the first host in a
venv of its own. The server role runs a stand-in server on each host (its own unit, user and
port, bound to the host's address, one shared API key, /metrics on), and with
`server_router_enabled` the router's own unit on the first host, its workers the group's
servers. Checked: the router's unit runs under a dynamic user with its hardening; requests
through it need the shared key and are spread over both servers; the key is in no Ansible
output, unit or `systemctl show`; an unchanged re-run changes nothing; a router change
restarts the router alone; a bad worker URL fails before anything changes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.hosts import serving_stack as stack

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

ROUTER_VERSION = "0.3.2"
ROUTER_VENV = "/opt/bwtune/router"
KEY = "dp-shared-key-0123456789abcdef"  # a test key: its point is that it never shows up
DP_UNIT = "bwtune-dp.service"
ROUTER_UNIT = "bwtune-sglang-router.service"
# systemd-analyze security of the router's unit (roles/server/README.md records it).
ROUTER_EXPOSURE = 1.2
# The servers get names of their own: the hosts are shared with the server and promote tests.
DP: dict[str, Any] = {
    "server_flags": stack.GOOD_FLAGS,
    "server_unit_name": "bwtune-dp",
    "server_user": "bwtune-dp",
    "server_group": "bwtune-dp",
    "server_config_dir": "/etc/bwtune/dp",
    "server_state_dir": "/var/lib/bwtune-dp",
    "server_cache_dir": "/var/cache/bwtune-dp",
    "server_host": "{{ ansible_host }}",
    "server_port": 30001,
    "server_api_key": KEY,
    "server_enable_metrics": True,
}
ROUTER: dict[str, Any] = {
    "server_router_enabled": "{{ inventory_hostname == groups.testhosts[0] }}",
    "server_router_workers_group": "testhosts",
    "server_router_policy": "round_robin",
    "server_router_launch_command": [f"{ROUTER_VENV}/bin/python", "-m", "sglang_router.launch_router"],
}

PROBE = """
import json, sys, urllib.request, urllib.error
url, key, body = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request(url, data=body.encode() or None, headers={"Content-Type": "application/json"})
if key:
    req.add_header("Authorization", "Bearer " + key)
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        print(json.dumps({"status": r.status, "body": r.read().decode()}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "body": e.read().decode()}))
"""
CHAT = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})


def request(hosts: Any, on: str, url: str, key: str = "", body: str = "") -> dict[str, Any]:
    done = hosts.ssh(on, "python3", "-c", PROBE, url, key, body)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def served(hosts: Any, on: str, worker: str) -> float:
    """Requests a worker has answered: its time-to-first-token histogram's count."""
    metrics = request(hosts, on, f"http://{hosts.addresses[worker]}:30001/metrics")["body"]
    found = re.search(r"^sglang:time_to_first_token_seconds_count\{[^}]*\} (\S+)$", metrics, re.M)
    assert found, metrics[-2000:]
    return float(found.group(1))


def show(hosts: Any, on: str, unit: str, *props: str) -> dict[str, str]:
    argv = ["systemctl", "show", unit] + [a for p in props for a in ("-p", p)]
    out = hosts.ssh(on, *argv).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def install_router(hosts: Any, on: str, work: Path) -> None:
    """sglang-router and its dependencies as wheels from PyPI, into a venv of its own on `on`
    (made by the host's python3: the wheels are those for its version)."""
    wheels = work / "router-wheels"
    pip = [sys.executable, "-m", "pip", "-q", "download", "--only-binary=:all:", "-d", str(wheels)]
    pip.append(f"--python-version={hosts.python_version()}")
    subprocess.run([*pip, f"sglang-router=={ROUTER_VERSION}"], check=True, timeout=600)
    # Straight into the host's file system (its overlay): one copy, not one SSH transfer a file.
    dest = hosts.dir / "hosts" / on / "merged" / "root" / "router-wheels"
    subprocess.run(["cp", "-r", str(wheels), str(dest)], check=True)
    script = (
        f"python3 -m venv {ROUTER_VENV} && {ROUTER_VENV}/bin/pip install -q --no-index"
        f" --find-links /root/router-wheels sglang-router=={ROUTER_VERSION}"
    )
    done = hosts.ssh(on, "sh", "-c", script, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def hosts(make_testhosts: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return stack.serving_hosts(make_testhosts, tmp_path_factory.mktemp("serving"))


@pytest.fixture(scope="module")
def routed(hosts: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("router")
    install_router(hosts, hosts.names[0], work)
    log = work / "ansible.log"
    first = stack.serve(hosts, {**DP, **ROUTER}, "-v", log=log)
    assert first.returncode == 0, first.stdout[-4000:]
    again = stack.serve(hosts, {**DP, **ROUTER}, log=log)
    return {"first": first, "again": again, "log": log}


def test_router_runs_hardened_under_a_dynamic_user(hosts: Any, routed: dict[str, Any]) -> None:
    router = hosts.names[0]
    props = show(hosts, router, ROUTER_UNIT, "ActiveState", "MainPID", "DynamicUser")
    assert props["ActiveState"] == "active" and props["DynamicUser"] == "yes"
    owner = hosts.ssh(router, "ps", "-o", "user=", "-p", props["MainPID"]).stdout.strip()
    assert owner not in ("root", "bwtune-dp", "")
    assert hosts.ssh(hosts.names[1], "systemctl", "cat", ROUTER_UNIT).returncode != 0  # one router
    security = hosts.ssh(router, "systemd-analyze", "security", ROUTER_UNIT, "--no-pager").stdout
    exposure = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", security)
    assert exposure and float(exposure.group(1)) <= ROUTER_EXPOSURE, security[-1500:]


def test_requests_through_the_router_need_the_key_and_reach_both_servers(
    hosts: Any, routed: dict[str, Any]
) -> None:
    router = hosts.names[0]
    url = "http://127.0.0.1:30100/v1/chat/completions"
    before = {w: served(hosts, router, w) for w in hosts.names}
    assert request(hosts, router, url, "", CHAT)["status"] == 401
    assert request(hosts, router, url, "not-the-key", CHAT)["status"] == 401
    answers = [request(hosts, router, url, KEY, CHAT) for _ in range(4)]
    assert [a["status"] for a in answers] == [200] * 4, answers
    after = {w: served(hosts, router, w) for w in hosts.names}
    assert {w: after[w] - before[w] for w in hosts.names} == {w: 2.0 for w in hosts.names}  # round robin


def test_the_shared_key_is_private(hosts: Any, routed: dict[str, Any]) -> None:
    router = hosts.names[0]
    mode = hosts.ssh(router, "stat", "-c", "%a %U", "/etc/bwtune/dp/router-api-key.env").stdout.split()
    assert mode == ["600", "root"]
    for name in hosts.names:
        assert (
            hosts.ssh(name, "cat", "/etc/bwtune/dp/api-key.env").stdout.strip()
            == f"BWTUNE_SERVER_API_KEY={KEY}"
        )
    outputs = routed["first"].stdout + routed["first"].stderr + routed["again"].stdout
    outputs += routed["log"].read_text()
    outputs += hosts.ssh(router, "cat", f"/etc/systemd/system/{ROUTER_UNIT}").stdout
    outputs += hosts.ssh(router, "systemctl", "show", ROUTER_UNIT).stdout
    assert KEY not in outputs


def test_unchanged_rerun_changes_nothing(hosts: Any, routed: dict[str, Any]) -> None:
    assert routed["again"].returncode == 0, routed["again"].stdout[-3000:]
    assert stack.changed_counts(routed["again"].stdout) == {name: 0 for name in hosts.names}


def test_a_router_change_restarts_the_router_alone(hosts: Any, routed: dict[str, Any]) -> None:
    router = hosts.names[0]
    before = {u: show(hosts, router, u, "MainPID")["MainPID"] for u in (ROUTER_UNIT, DP_UNIT)}
    done = stack.serve(hosts, {**DP, **ROUTER, "server_router_policy": "random", "target": router})
    assert done.returncode == 0, done.stdout[-3000:]
    after = {u: show(hosts, router, u, "MainPID")["MainPID"] for u in (ROUTER_UNIT, DP_UNIT)}
    assert after[DP_UNIT] == before[DP_UNIT]
    assert after[ROUTER_UNIT] != before[ROUTER_UNIT]
    assert "--policy random" in hosts.ssh(router, "systemctl", "cat", ROUTER_UNIT).stdout


def test_a_bad_worker_url_fails_before_anything_changes(hosts: Any, routed: dict[str, Any]) -> None:
    router = hosts.names[0]
    unit = f"/etc/systemd/system/{ROUTER_UNIT}"
    before = hosts.ssh(router, "sha256sum", unit).stdout
    bad = {**DP, **ROUTER, "server_router_worker_urls": ["http://host one:30001"], "target": router}
    done = stack.serve(hosts, bad)
    assert done.returncode != 0
    assert "server_router_worker_urls / server_router_workers_group: the router needs" in done.stdout
    assert '"http://host one:30001"' in done.stdout
    assert hosts.ssh(router, "sha256sum", unit).stdout == before
