"""A failed provisioning task is one line that names its cause, and the run's artifacts are named.

Fault campaign (issue 20, item 10): a disk filling up during the stack install failed pip
with its whole output in `msg` ("stdout: Looking in links: ... :stderr: ... [Errno 28] No
space left on device"); the line was cut after 300 characters of the stdout part, and the
artifact directory holding the rest was not printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bwtune import ansible_run, cli, exit_codes
from bwtune.ansible_run import events as run_events
from bwtune.commands import provision

REPO = Path(__file__).resolve().parents[3]

LINKS = "Looking in links: /srv/wheelhouse"
PIP_OUT = "\n".join(
    [LINKS]
    + [
        f"Processing /srv/wheelhouse/nvidia_pkg{i}-13.0.{i}-py3-none-manylinux_2_28_x86_64.whl "
        "(from torch==2.13.0)"
        for i in range(12)
    ]
    + ["Installing collected packages: nvidia-pkg0, nvidia-pkg1, torch"]
)
PIP_ERR = "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device"
# What ansible.builtin.pip fails with: its whole stdout, then its stderr.
PIP_MSG = f"stdout: {PIP_OUT}\n\n:stderr: {PIP_ERR}\n"


def failed_run(tmp_path: Path) -> ansible_run.PlaybookRun:
    done = ansible_run.PlaybookRun(playbook=Path("provision.yml"), private_data_dir=tmp_path, ident="run1")
    events = [
        {
            "event": "runner_on_failed",
            "event_data": {
                "host": "node1",
                "task": "Install torch into the stack venv",
                "resolved_action": "ansible.builtin.pip",
                "res": {"failed": True, "msg": PIP_MSG, "cmd": ["pip", "install", "torch==2.13.0"]},
            },
        },
        {"event": "playbook_on_stats", "event_data": {"failures": {"node1": 1}, "processed": {"node1": 1}}},
    ]
    for raw in events:
        event = run_events.reduce(raw)
        assert event is not None
        run_events.record(done, event)
    done.rc, done.status = 2, "failed"
    return done


def test_a_long_failure_message_keeps_its_cause(tmp_path: Path) -> None:
    line = failed_run(tmp_path).failures["node1"].line()
    assert line.startswith("host node1 failed in task 'Install torch into the stack venv': stdout: " + LINKS)
    assert line.endswith(PIP_ERR)
    assert len(line) < 400 and "\n" not in line
    # A short message stays whole.
    assert run_events.failure_message({"msg": "no  such\nfile"}) == "no such file"


def test_provision_names_the_cause_and_the_artifacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def load_inventory(path: str, limit: str | None = None) -> ansible_run.Inventory:
        return ansible_run.Inventory(Path(path), {"node1": {}})

    def run_playbook(name: str, inventory: Any, extravars: Any, **kw: Any) -> ansible_run.PlaybookRun:
        return failed_run(tmp_path)

    monkeypatch.setattr(ansible_run, "load_inventory", load_inventory)
    monkeypatch.setattr(ansible_run, "run_playbook", run_playbook)
    assert cli.main(["provision", "-i", "inv.yml", "--quiet"]) == exit_codes.HOST_FAILED
    err = capsys.readouterr().err.splitlines()
    [failure] = [ln for ln in err if "host node1 failed" in ln]
    assert "[Errno 28] No space left on device" in failure
    assert f"bwtune: the run's whole output: {tmp_path / 'artifacts' / 'run1'}" in err


def test_provision_says_which_stacks_it_removed_and_which_it_kept_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    playbook = (REPO / "playbooks" / "provision.yml").read_text()
    for task in (provision.FINGERPRINT_TASK, provision.BUILDING_TASK, provision.ACTIVATE_TASK):
        assert f"- name: {task}\n" in playbook  # the tasks the lines are read from

    def ok(task: str, res: dict[str, Any]) -> dict[str, Any]:
        data = {"host": "node1", "task": task, "resolved_action": "bwtune.sglang.stack_layout", "res": res}
        return {"event": "runner_on_ok", "event_data": data}

    why = "pid 812 (python3) maps /opt/bwtune/stacks/aaaaaaaaaaaa/lib/libtorch.so"
    events = [
        ok(provision.FINGERPRINT_TASK, {"fingerprint": "cccccccccccc", "verified": False, "changes": ["x"]}),
        ok(provision.BUILDING_TASK, {"removed": ["bbbbbbbbbbbb"]}),
        ok(provision.ACTIVATE_TASK, {"removed": [], "kept_in_use": {"aaaaaaaaaaaa": why}}),
        {"event": "playbook_on_stats", "event_data": {"ok": {"node1": 3}, "processed": {"node1": 1}}},
    ]

    def run_playbook(name: str, inventory: Any, extravars: Any, **kw: Any) -> ansible_run.PlaybookRun:
        done = ansible_run.PlaybookRun(playbook=Path(name), private_data_dir=tmp_path, ident="run2")
        for raw in events:
            event = run_events.reduce(raw)
            assert event is not None
            run_events.record(done, event)
        done.rc, done.status = 0, "successful"
        return done

    monkeypatch.setattr(
        ansible_run,
        "load_inventory",
        lambda path, limit=None: ansible_run.Inventory(Path(path), {"node1": {}}),
    )
    monkeypatch.setattr(ansible_run, "run_playbook", run_playbook)
    assert cli.main(["provision", "-i", "inv.yml", "--quiet"]) == exit_codes.OK
    out = capsys.readouterr().out.splitlines()
    assert "node1: removed failed stack attempts bbbbbbbbbbbb" in out
    assert (
        f"node1: kept stack aaaaaaaaaaaa beyond provision_keep: in use ({why}); restart it onto current"
        in out
    )


def test_a_failed_loop_names_its_first_failed_item_and_why() -> None:
    # What ansible-core returns for a loop whose second item failed: the loop's own message
    # ("One or more items failed") says nothing; the failed item's message says why.
    res = {
        "msg": "One or more items failed",
        "results": [
            {"item": "torch", "failed": False, "msg": "All assertions passed"},
            {
                "item": "sglang",
                "_ansible_item_label": "sglang",
                "failed": True,
                "msg": "The task includes an option with an undefined variable. 'sglang_commit' is undefined",
            },
        ],
    }
    assert run_events.failure_message(res) == (
        "sglang: The task includes an option with an undefined variable. 'sglang_commit' is undefined"
    )
    # A message of its own is kept as it is.
    assert run_events.failure_message({**res, "msg": "disk full"}) == "disk full"
