"""The server role on two systemd hosts, the stand-in in SGLang's place (tests/hosts/serving_stack.py).

One converge, then checks on what it made: the unit active under its own user, /health,
401 without the key and 200 with it, the key file 0600 and in no Ansible output or log, an
unchanged re-run changes nothing, a config change (one flag with an odd value, /metrics on)
restarts exactly once and the value reaches the server verbatim through systemd's quoting,
a failing config is classified.

Run on the session's Debian release and on each of conftest.ALSO_ON (trixie in a normal
run): what the server role does differs by release (the system Python that runs its
modules and makes the stand-in's venv, systemd's version enforcing the unit's hardening).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.hosts import serving_stack as stack
from tests.hosts.conftest import releases

pytestmark = [pytest.mark.hosts, pytest.mark.slow]


@pytest.fixture(scope="module", params=releases())
def hosts(
    make_testhosts: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Any:
    return stack.serving_hosts(make_testhosts, tmp_path_factory.mktemp("serving"), request.param)


# The check-mode run's own service: a unit, user and folders no other test module makes, so
# it meets a host that has never had this service even when the booted hosts are shared
# (serving_stack boots them once per session and release).
CHECK_SERVICE = {
    "server_unit_name": "bwtune-checkmode",
    "server_user": "bwtune-checkmode",
    "server_group": "bwtune-checkmode",
    "server_config_dir": "/etc/bwtune/checkmode",
    "server_state_dir": "/var/lib/bwtune-checkmode",
    "server_cache_dir": "/var/cache/bwtune-checkmode",
    "server_port": 30990,
}
CHECK_PATHS = [
    "/etc/systemd/system/bwtune-checkmode.service",
    "/etc/bwtune/checkmode",
    "/var/lib/bwtune-checkmode",
    "/var/cache/bwtune-checkmode",
]


def _what_exists(hosts: Any, name: str) -> list[str]:
    """The check service's paths and user that exist on host `name`."""
    found = [path for path in CHECK_PATHS if hosts.ssh(name, "test", "-e", path).returncode == 0]
    if hosts.ssh(name, "id", "bwtune-checkmode").returncode == 0:
        found.append("user bwtune-checkmode")
    return found


@pytest.fixture(scope="module")
def converged(hosts: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    log = tmp_path_factory.mktemp("ansible-log") / "ansible.log"
    before_check = {name: _what_exists(hosts, name) for name in hosts.names}
    check = stack.serve(hosts, {"server_flags": stack.GOOD_FLAGS, **CHECK_SERVICE}, "--check", log=log)
    made_by_check = {name: _what_exists(hosts, name) for name in hosts.names}
    first = stack.serve(hosts, {"server_flags": stack.GOOD_FLAGS}, "-vv", log=log)
    assert first.returncode == 0, first.stdout[-4000:]
    again = stack.serve(hosts, {"server_flags": stack.GOOD_FLAGS}, log=log)
    return {
        "check": check,
        "before_check": before_check,
        "made_by_check": made_by_check,
        "first": first,
        "again": again,
        "log": log,
    }


def test_check_mode_on_a_fresh_host_reports_changes_and_makes_nothing(
    hosts: Any, converged: dict[str, Any]
) -> None:
    assert converged["before_check"] == {name: [] for name in hosts.names}  # fresh for this service
    assert converged["check"].returncode == 0, converged["check"].stdout[-3000:]
    assert all(stack.changed_counts(converged["check"].stdout)[name] > 0 for name in hosts.names)
    assert converged["made_by_check"] == {name: [] for name in hosts.names}  # no unit, user or folder


def test_unit_runs_under_its_own_user_and_serves(hosts: Any, converged: dict[str, Any]) -> None:
    for name in hosts.names:
        show = hosts.ssh(name, "systemctl", "show", stack.UNIT, "-p", "ActiveState", "-p", "MainPID").stdout
        props = dict(line.split("=", 1) for line in show.split())
        assert props["ActiveState"] == "active"
        owner = hosts.ssh(name, "ps", "-o", "user=", "-p", props["MainPID"]).stdout.strip()
        assert owner == "bwtune-sglang"
        assert stack.http_get(hosts, name, "/health")["status"] == 200


def test_api_key_is_required_and_private(hosts: Any, converged: dict[str, Any]) -> None:
    name = hosts.names[0]
    assert stack.http_get(hosts, name, "/v1/models")["status"] == 401
    assert stack.http_get(hosts, name, "/v1/models", "FILE")["status"] == 200
    mode = hosts.ssh(name, "stat", "-c", "%a %U %G", "/etc/bwtune/server/api-key.env").stdout.split()
    assert mode == ["600", "root", "root"]
    keys = {
        n: hosts.ssh(n, "cat", "/etc/bwtune/server/api-key.env").stdout.strip().partition("=")[2]
        for n in hosts.names
    }
    assert all(len(k) == 48 for k in keys.values()) and len(set(keys.values())) == 2  # one key per host
    outputs = converged["first"].stdout + converged["first"].stderr + converged["again"].stdout
    outputs += Path(converged["log"]).read_text()
    unit = hosts.ssh(name, "cat", f"/etc/systemd/system/{stack.UNIT}").stdout
    for key in keys.values():
        assert key not in outputs
        assert key not in unit
    # Issue 20 #29: SGLang reads the key from its --config file, so no command line holds it
    # (`ps` shows every command line to every local user).
    mode = hosts.ssh(name, "stat", "-c", "%a %U %G", "/etc/bwtune/server/api-key.yaml").stdout.split()
    assert mode == ["640", "root", "bwtune-sglang"]
    assert json.loads(hosts.ssh(name, "cat", "/etc/bwtune/server/api-key.yaml").stdout) == {
        "api-key": keys[name]
    }
    as_nobody = hosts.ssh(
        name, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "ps", "-eo", "args"
    )
    assert (
        "bwtune.standin" in as_nobody.stdout
        and "--config /etc/bwtune/server/api-key.yaml" in as_nobody.stdout
    )
    assert keys[name] not in as_nobody.stdout and "--api-key" not in as_nobody.stdout


def test_unchanged_rerun_changes_nothing(hosts: Any, converged: dict[str, Any]) -> None:
    assert converged["again"].returncode == 0, converged["again"].stdout[-3000:]
    assert stack.changed_counts(converged["again"].stdout) == {name: 0 for name in hosts.names}


def test_a_config_change_restarts_once_and_reaches_the_server_verbatim(
    hosts: Any, converged: dict[str, Any]
) -> None:
    name = hosts.names[0]
    cursor = hosts.ssh(name, "journalctl", "-u", stack.UNIT, "-n", "0", "--show-cursor", "--no-pager").stdout
    cursor = cursor.strip().rpartition("-- cursor: ")[2]
    # Issue 21 #14: a word naming the key's old variable stays those characters.
    odd = 'my "model" 50% $HOME ${BWTUNE_SERVER_API_KEY} %H \\ x'
    flags = {**stack.GOOD_FLAGS, "served-model-name": odd}
    assert stack.http_get(hosts, name, "/metrics")["status"] == 404
    done = stack.serve(hosts, {"server_flags": flags, "server_enable_metrics": True, "target": name})
    assert done.returncode == 0, done.stdout[-3000:]
    journal = hosts.ssh(
        name, "journalctl", "-u", stack.UNIT, "--after-cursor", cursor, "--no-pager", "-o", "cat"
    ).stdout
    assert sum(line.startswith("Started ") for line in journal.splitlines()) == 1, journal
    info = json.loads(stack.http_get(hosts, name, "/server_info", "FILE")["body"])
    assert info["served_model_name"] == odd
    assert stack.http_get(hosts, name, "/metrics")["status"] == 200  # no key needed, as in SGLang


def test_failing_config_is_classified_with_the_journal_tail(hosts: Any, converged: dict[str, Any]) -> None:
    name = hosts.names[1]
    bad = {**stack.GOOD_FLAGS, "moe-runner-backend": "flashinfer_trtllm"}  # SM100-only kernels on SM120
    done = stack.serve(hosts, {"server_flags": bad, "target": name})
    assert done.returncode != 0
    assert "is not serving: unsupported-hardware" in done.stdout
    assert "journal tail" in done.stdout
