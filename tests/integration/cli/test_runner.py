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

from bwtune import ansible_run
from bwtune.ansible_run import playbooks, stopping

from .conftest import INVENTORIES, LOCAL_INVENTORY, PLAYBOOKS

MECHANICS = PLAYBOOKS / "mechanics.yml"


def test_events_give_module_results_retries_and_stats(bwtune_home: Path) -> None:
    seen: list[ansible_run.RunnerEvent] = []
    payload = {"matrix": {"axes": {"tp": [1, 2]}}, "note": "héllo"}
    outcome = ansible_run.run_playbook(
        MECHANICS,
        ansible_run.load_inventory(INVENTORIES / "two_local.yml"),
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
    outcome = ansible_run.run_playbook(
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
    outcome = ansible_run.run_playbook(
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
    outcome = ansible_run.run_playbook(MECHANICS, inventory, {}, quiet=True)
    assert outcome.rc != 0
    assert outcome.failures["ghost"].kind == "unreachable"
    assert "ghost is unreachable" in outcome.failures["ghost"].line()
    assert "Connection refused" in outcome.failures["ghost"].message


def test_private_data_dir_is_private(bwtune_home: Path) -> None:
    run_id = ansible_run.new_run_id()
    pdd = ansible_run.private_data_dir(run_id)
    assert pdd == bwtune_home / "runs" / run_id / "runner"
    outcome = ansible_run.run_playbook(
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
    second = ansible_run.run_playbook(MECHANICS, LOCAL_INVENTORY, {}, private_data_dir=pdd, quiet=True)
    assert second.results("debug")["localhost"]["msg"] == {}
    assert not extravars.exists()
    assert len(list((pdd / "artifacts").iterdir())) == 2


def test_bad_inventory_path_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        ansible_run.InventoryError, match=r"^inventory /nonexistent/hosts.yml: no such file or directory$"
    ):
        ansible_run.load_inventory("/nonexistent/hosts.yml")
    with pytest.raises(ansible_run.InventoryError, match="no such file"):
        ansible_run.run_playbook(MECHANICS, tmp_path / "missing.yml", {}, quiet=True)


def test_unparsable_inventory_names_the_parser_and_reason() -> None:
    with pytest.raises(ansible_run.InventoryError) as caught:
        ansible_run.load_inventory(INVENTORIES / "broken.yml")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"inventory {INVENTORIES / 'broken.yml'}: cannot be parsed as yaml: ")
    assert "flow mapping" in message


def test_inventory_hosts_vars_and_limit() -> None:
    inventory = ansible_run.load_inventory(INVENTORIES / "two_local.yml")
    assert inventory.hosts == ["alpha", "beta"]
    assert (inventory.simulated("alpha"), inventory.simulated("beta")) == (False, True)
    assert ansible_run.load_inventory(INVENTORIES / "two_local.yml", limit="alpha").hosts == ["alpha"]
    with pytest.raises(ansible_run.InventoryError, match="no hosts matching --limit 'gamma'"):
        ansible_run.load_inventory(INVENTORIES / "two_local.yml", limit="gamma")


CANCEL_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from bwtune import ansible_run
    with ansible_run.cancel_on_interrupt() as cancel:
        t0 = time.monotonic()
        outcome = ansible_run.run_playbook(
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
    # The task has started; its module may need a while on a loaded machine to exec `sleep`.
    deadline = time.monotonic() + 30
    ours = set(_sleepers()) - unrelated
    while not ours and time.monotonic() < deadline:
        time.sleep(0.1)
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


def test_artifacts_that_cannot_be_written_stop_the_playbook_and_say_where(
    bwtune_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full BWTUNE_HOME (issue 21 #10): ansible-runner's ENOSPC left ansible-playbook behind.
    fixed = playbooks.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=playbooks.UTC)

    class Frozen(playbooks.datetime):
        @classmethod
        def now(cls, tz: object = None) -> playbooks.datetime:  # type: ignore[override]
            return fixed

    monkeypatch.setattr(playbooks, "datetime", Frozen)
    pdd = tmp_path / "runner"
    artifacts = pdd / "artifacts" / (fixed.strftime("%Y%m%dT%H%M%S.%fZ") + "-mechanics")
    artifacts.mkdir(parents=True)
    (artifacts / "stdout").symlink_to("/dev/full")  # every write of the playbook's output: ENOSPC
    with pytest.raises(ansible_run.ArtifactWriteError) as raised:
        ansible_run.run_playbook(
            MECHANICS, LOCAL_INVENTORY, {"mechanics_payload": {}}, private_data_dir=pdd, quiet=True
        )
    assert str(raised.value) == f"cannot write {pdd}: No space left on device"
    mine = [
        pid
        for pid in stopping._children_by_pid().get(os.getpid(), [])
        if b"ansible-playbook" in stopping._cmdline(pid)
    ]
    assert mine == [], "ansible-playbook outlived the failed run"


def test_an_event_file_cut_short_by_a_full_disk_is_the_same_one_line(
    bwtune_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ansible-runner reading back an event file that ENOSPC left empty raises a ValueError.
    def cut_short(**kwargs: object) -> None:
        raise json.JSONDecodeError("Expecting value", "", 0)

    monkeypatch.setattr(playbooks.ansible_runner, "run", cut_short)
    monkeypatch.setattr(playbooks, "_no_space", lambda path: True)
    pdd = tmp_path / "runner"
    with pytest.raises(
        ansible_run.ArtifactWriteError, match=rf"^cannot write {pdd}: No space left on device$"
    ):
        ansible_run.run_playbook(MECHANICS, LOCAL_INVENTORY, private_data_dir=pdd, quiet=True)
    monkeypatch.setattr(playbooks, "_no_space", lambda path: False)
    with pytest.raises(json.JSONDecodeError):  # not a storage problem: raised as it is
        ansible_run.run_playbook(MECHANICS, LOCAL_INVENTORY, private_data_dir=pdd, quiet=True)
