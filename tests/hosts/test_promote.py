"""`bwtune promote` on two systemd hosts with the stand-in as SGLang (tests/hosts/serving_stack.py).

A run in a results database holds a good config (the best) and one whose stand-in fails at
start (`--mem-fraction-static 0.95`: the profile's out-of-memory in graph capture, as on a
GPU with less room than the sweep's). The good one rolls out to both hosts; the failing one
stops on the first host, which goes back to the good config and keeps serving, and the
second host is not touched. The run records the hosts' hardware group (the GPUs of the
stand-in's fake nvidia-smi and the stand-in stack's fingerprint, as `bwtune facts` reads
them), so promote finds both hosts in it. (Hosts left out of the group:
tests/unit/serving/test_promote_hosts.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import exit_codes, results_db
from bwtune.analysis.hardware_group import HardwareGroup
from tests.hosts import serving_stack as stack

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

RUN = "promote-test-1"
GOOD = {**stack.GOOD_FLAGS, "max-running-requests": 32}
FAILS_TO_START = {**stack.GOOD_FLAGS, "mem-fraction-static": 0.95}
# The stand-in's fake nvidia-smi on the hosts, run by the stand-in stack's Python.
FAKE_SMI = "/usr/local/lib/bwtune-test/nvidia-smi"
FAKE_SMI_SCRIPT = '#!/bin/sh\nexec /opt/bwtune/stacks/current/bin/python -m bwtune.standin.fake_smi "$@"\n'


def line(config_id: str, flags: dict[str, Any], throughput: float, group: HardwareGroup) -> dict[str, Any]:
    argv = ["--model-path", stack.MODEL_PATH]
    for name, value in flags.items():
        argv += [f"--{name}", str(value)]
    block = {
        "n": 1,
        "values": {"output_throughput": throughput},
        "repetitions": [{"output_throughput": throughput}],
    }
    return contract.make_line(
        run_id=RUN, host="sweep-node", config_id=config_id, status="ok", flags=flags, argv=argv,
        metrics={"chat": block}, simulated=True, gpu=group.sm, stack_fingerprint=group.stack_fingerprint,
    )  # fmt: skip


@pytest.fixture(scope="module")
def hosts(make_testhosts: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    # Whatever the hosts serve now (the server tests' config, or nothing) is what promote replaces.
    return stack.serving_hosts(make_testhosts, tmp_path_factory.mktemp("serving"))


def inventory(hosts: Any) -> Path:
    """The hosts' inventory, with the fake nvidia-smi as theirs.

    The hosts serve the stand-in, so they are simulated hosts: promote takes a simulated
    result only to such hosts (the refusal itself: tests/unit/serving/test_promote_hosts.py).
    """
    data = yaml.safe_load(hosts.inventory.read_text())
    host_vars = data["all"]["children"]["testhosts"]["vars"]
    host_vars["bwtune_nvidia_smi"] = FAKE_SMI
    host_vars["bwtune_simulated"] = True
    path = hosts.dir / "promote-inventory.yml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def group(hosts: Any) -> HardwareGroup:
    """The hosts' hardware group, as `bwtune facts` (and so a sweep on them) sees it."""
    install = f"mkdir -p {Path(FAKE_SMI).parent} && printf '%s' \"$0\" > {FAKE_SMI} && chmod 755 {FAKE_SMI}"
    for name in hosts.names:
        assert hosts.ssh(name, "sh", "-c", install, FAKE_SMI_SCRIPT).returncode == 0
    bwtune = Path(sys.executable).parent / "bwtune"
    pipelining = ["-e", "ansible_pipelining=1"]  # one SSH round trip per task, as the promote runs have
    done = subprocess.run(
        [str(bwtune), "facts", "-i", str(inventory(hosts)), "--json", *pipelining],
        capture_output=True, text=True, env=hosts.env(), timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = {h: HardwareGroup.of_facts(f) for h, f in json.loads(done.stdout)["hosts"].items()}
    assert len(set(found.values())) == 1 and not next(iter(found.values())).missing(), found
    return next(iter(found.values()))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, group: HardwareGroup) -> Path:
    path = tmp_path_factory.mktemp("promote-db") / "results.db"
    conn = results_db.connect(path)
    results_db.record_run(
        conn, RUN, objective={"workload": "chat", "metric": "output_throughput", "goal": "max"}
    )
    results_db.import_results(
        conn,
        [line("cgood000001", GOOD, 100.0, group), line("cfails00002", FAILS_TO_START, 90.0, group)],
    )
    conn.close()
    return path


def promote(hosts: Any, db: Path, tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    variables = tmp_path / "standin-vars.json"
    variables.write_text(json.dumps(stack.STANDIN_VARS))
    env = dict(hosts.env(), BWTUNE_HOME=str(tmp_path / "home"))
    bwtune = Path(sys.executable).parent / "bwtune"
    where = str(inventory(hosts))
    cmd = [str(bwtune), "promote", RUN, "-i", where, "--db", str(db), "-e", f"@{variables}"]
    done = subprocess.run(
        [*cmd, *extra, "--json"], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    return done.returncode, json.loads(done.stdout or "{}"), done.stderr


def running(hosts: Any, name: str) -> dict[str, Any]:
    """The config the host's server role recorded (none yet: {}) and the server's pid."""
    text = hosts.ssh(name, "cat", "/etc/bwtune/server/config.json").stdout
    record = json.loads(text) if text.strip() else {"config_id": None, "run_id": None}
    pid = hosts.ssh(name, "systemctl", "show", stack.UNIT, "-p", "MainPID", "--value").stdout.strip()
    return {"config_id": record["config_id"], "run_id": record["run_id"], "pid": pid}


def test_good_config_rolls_out_to_both_then_a_failing_one_stops_and_rolls_back(
    hosts: Any, db: Path, tmp_path: Path
) -> None:
    first, second = hosts.names
    rc, out, err = promote(hosts, db, tmp_path)
    assert rc == 0, err
    assert out["config_id"] == "cgood000001"
    assert {h: r["status"] for h, r in out["hosts"].items()} == {first: "promoted", second: "promoted"}
    changes = {c["flag"]: c["new"] for c in out["hosts"][first]["changed_flags"]}
    assert changes["max-running-requests"] == "32"
    for name in hosts.names:
        assert running(hosts, name)["config_id"] == "cgood000001"
        info = json.loads(stack.http_get(hosts, name, "/server_info", "FILE")["body"])
        assert info["max_running_requests"] == 32
    untouched = running(hosts, second)

    rc, out, err = promote(hosts, db, tmp_path, "--config", "cfails00002")
    assert rc == exit_codes.HOST_FAILED
    assert out["hosts"][first]["status"] == "rolled back"
    assert "oom" in out["hosts"][first]["message"], out["hosts"][first]["message"]
    assert out["hosts"][second]["status"] == "not reached"
    assert running(hosts, first)["config_id"] == "cgood000001"
    assert stack.http_get(hosts, first, "/health")["status"] == 200
    info = json.loads(stack.http_get(hosts, first, "/server_info", "FILE")["body"])
    assert info["max_running_requests"] == 32 and info["mem_fraction_static"] != 0.95
    assert running(hosts, second) == untouched  # same config, same process


def test_unknown_config_is_refused_before_any_host_is_touched(hosts: Any, db: Path, tmp_path: Path) -> None:
    before = {name: running(hosts, name) for name in hosts.names}
    rc, out, err = promote(hosts, db, tmp_path, "--config", "cnothere000")
    assert rc == exit_codes.BAD_INPUT and out == {}
    assert err.strip() == f"bwtune: --config cnothere000: no such config in run {RUN}"
    assert {name: running(hosts, name) for name in hosts.names} == before
