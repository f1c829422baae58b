"""The ansible-runner wrapper against real playbooks on this machine (no mocking)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bwtune import runner

from .conftest import INVENTORIES, LOCAL_INVENTORY, PLAYBOOKS

MECHANICS = PLAYBOOKS / "mechanics.yml"


def test_events_give_module_results_retries_and_stats(bwtune_home: Path) -> None:
    seen: list[runner.RunnerEvent] = []
    payload = {"matrix": {"axes": {"tp": [1, 2]}}, "note": "héllo"}
    outcome = runner.run_playbook(
        MECHANICS,
        runner.load_inventory(INVENTORIES / "two_local.yml"),
        {"mechanics_payload": payload},
        on_event=seen.append,
        quiet=True,
    )
    assert (outcome.rc, outcome.status, outcome.failures) == (0, "successful", {})
    assert outcome.hosts == ["alpha", "beta"]
    # The debug module's result per host carries the extravars back unchanged.
    debug = outcome.results("ansible.builtin.debug")
    assert {host: res["msg"] for host, res in debug.items()} == {"alpha": payload, "beta": payload}
    assert outcome.results("debug") == debug
    assert outcome.results("bwtune.sglang.debug") == {}
    # `until` loops show up as retry events, two per host before the ok.
    retries = [e for e in seen if e.kind == "retry"]
    assert sorted(e.host for e in retries) == ["alpha", "alpha", "beta", "beta"]
    assert all(e.task == "Poll until done" and e.res["attempts"] in (1, 2) for e in retries)
    # set_stats data arrives merged across hosts in playbook_on_stats.
    assert outcome.artifact_data == {"mechanics": {"alpha": payload, "beta": payload}}
    assert seen[-1].kind == "stats"


def test_a_failed_task_names_the_host_and_task(bwtune_home: Path) -> None:
    outcome = runner.run_playbook(
        MECHANICS,
        INVENTORIES / "two_local.yml",
        {"mechanics_fail_host": "beta"},
        quiet=True,
    )
    assert outcome.rc == 2
    assert list(outcome.failures) == ["beta"]
    failure = outcome.failures["beta"]
    assert (failure.kind, failure.task, failure.message) == (
        "failed",
        "Fail on request",
        "asked to fail beta",
    )
    assert failure.line() == "host beta failed in task 'Fail on request': asked to fail beta"
    # alpha carried on and recorded its stats; beta stopped before its set_stats.
    assert outcome.artifact_data == {"mechanics": {"alpha": {}}}


def test_limit_forks_extra_vars_and_verbosity_are_honoured(
    bwtune_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    literal = "a b $HOME 'q' ;"
    outcome = runner.run_playbook(
        MECHANICS,
        INVENTORIES / "two_local.yml",
        {},
        limit="beta",
        forks=1,
        quiet=True,
        verbosity=2,
        extra_args=["-e", json.dumps({"mechanics_payload": {"x": literal}})],
    )
    assert outcome.rc == 0
    assert outcome.hosts == ["beta"]
    # -e reaches ansible-playbook as one argument, taken literally.
    assert outcome.results("debug")["beta"]["msg"] == {"x": literal}
    # With -v, ansible-playbook's own output is shown, on stderr: stdout is for results.
    out, err = capsys.readouterr()
    assert out == "" and "TASK [Echo the extravars]" in err


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again once the socket is


def test_an_unreachable_host_is_reported_as_such(bwtune_home: Path, tmp_path: Path) -> None:
    inventory = tmp_path / "unreachable.yml"
    text = (INVENTORIES / "unreachable.yml").read_text()
    inventory.write_text(text.replace("ansible_port: 1", f"ansible_port: {_closed_port()}"))
    outcome = runner.run_playbook(MECHANICS, inventory, {}, quiet=True)
    assert outcome.rc != 0
    assert outcome.failures["ghost"].kind == "unreachable"
    assert "ghost is unreachable" in outcome.failures["ghost"].line()
    assert "Connection refused" in outcome.failures["ghost"].message


def test_private_data_dir_is_private(bwtune_home: Path) -> None:
    run_id = runner.new_run_id()
    pdd = runner.private_data_dir(run_id)
    assert pdd == bwtune_home / "runs" / run_id / "runner"
    outcome = runner.run_playbook(
        MECHANICS,
        LOCAL_INVENTORY,
        {"mechanics_payload": {"token": "s3cret"}},
        private_data_dir=pdd,
        quiet=True,
    )
    assert outcome.rc == 0
    for directory in (pdd.parent, pdd):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    extravars = pdd / "env" / "extravars"
    assert "s3cret" in extravars.read_text()
    assert stat.S_IMODE(extravars.stat().st_mode) == 0o600
    # A second playbook in the same dir does not inherit the first one's extravars.
    second = runner.run_playbook(MECHANICS, LOCAL_INVENTORY, {}, private_data_dir=pdd, quiet=True)
    assert second.results("debug")["localhost"]["msg"] == {}
    assert not extravars.exists()
    assert len(list((pdd / "artifacts").iterdir())) == 2


def test_bad_inventory_path_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        runner.InventoryError, match=r"^inventory /nonexistent/hosts.yml: no such file or directory$"
    ):
        runner.load_inventory("/nonexistent/hosts.yml")
    with pytest.raises(runner.InventoryError, match="no such file"):
        runner.run_playbook(MECHANICS, tmp_path / "missing.yml", {}, quiet=True)


def test_unparsable_inventory_names_the_parser_and_reason() -> None:
    with pytest.raises(runner.InventoryError) as caught:
        runner.load_inventory(INVENTORIES / "broken.yml")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"inventory {INVENTORIES / 'broken.yml'}: cannot be parsed as yaml: ")
    assert "flow mapping" in message


def test_inventory_hosts_vars_and_limit() -> None:
    inventory = runner.load_inventory(INVENTORIES / "two_local.yml")
    assert inventory.hosts == ["alpha", "beta"]
    assert (inventory.simulated("alpha"), inventory.simulated("beta")) == (False, True)
    assert runner.load_inventory(INVENTORIES / "two_local.yml", limit="alpha").hosts == ["alpha"]
    with pytest.raises(runner.InventoryError, match="no hosts matching --limit 'gamma'"):
        runner.load_inventory(INVENTORIES / "two_local.yml", limit="gamma")


CANCEL_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from bwtune import runner
    with runner.cancel_on_interrupt() as cancel:
        t0 = time.monotonic()
        outcome = runner.run_playbook(
            sys.argv[1], sys.argv[2], {"mechanics_sleep_s": 137},
            on_event=lambda e: print("EVENT", e.kind, e.task, flush=True), quiet=True, cancel=cancel.event)
    print("DONE", json.dumps({"status": outcome.status, "rc": outcome.rc,
                              "seconds": time.monotonic() - t0}), flush=True)
    """
)


def test_sigint_cancels_the_playbook_cleanly(bwtune_home: Path, tmp_path: Path) -> None:
    unrelated = set(_sleepers())
    script = tmp_path / "cancel.py"
    script.write_text(CANCEL_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(MECHANICS), str(LOCAL_INVENTORY)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("EVENT task_start Sleep"):
            break
    else:
        pytest.fail(f"the playbook never reached its sleep (rc {proc.wait()})")
    time.sleep(1.0)  # the sleep command is running on the "node" now
    ours = set(_sleepers()) - unrelated
    assert ours, "the playbook's sleep task is not running"
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    done = [line for line in rest.splitlines() if line.startswith("DONE")]
    assert done and '"status": "canceled"' in done[0] and '"rc": 254' in done[0]
    # The task's worker and the module it ran went with ansible-playbook.
    assert not ours & set(_sleepers())


def _sleepers() -> list[str]:
    """`sleep 137` processes (the playbook's task) alive now."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmdline[:2] == [b"sleep", b"137"]:
                found.append(entry.name)
    return found
