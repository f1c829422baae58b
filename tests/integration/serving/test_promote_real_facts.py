"""`bwtune promote` with the real facts playbook on two local hosts: the facts decide the
hardware group, and nothing is touched when no host is of it (the command's wiring with
recorded events is in tests/unit/serving/test_promote_hosts.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bwtune import ansible_run, cli, exit_codes
from bwtune.commands import promote
from tests.unit.serving.test_promote_hosts import FP, RUN, db  # noqa: F401  (db: the fixture)


@pytest.mark.integration  # the real facts playbook on two local hosts
def test_real_facts_decide_and_nothing_is_touched_when_no_host_is_of_the_group(
    db: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "inventory.yml"
    hosts = {
        # The stand-in's fake nvidia-smi: 8 x RTX PRO 6000 (sm120); the stack is this Python.
        "node-a": {**local, "bwtune_simulated": True, "bwtune_stack_python": sys.executable},
        "node-b": {**local, "bwtune_nvidia_smi": str(tmp_path / "no-nvidia-smi")},
    }
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    ran: list[str] = []
    real = ansible_run.run_playbook

    def recording(name: str, *args: Any, **kwargs: Any) -> ansible_run.PlaybookRun:
        ran.append(str(name))
        if name != promote.FACTS_PLAYBOOK:
            raise AssertionError(f"{name} ran: a host outside the group would have been touched")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(ansible_run, "run_playbook", recording)
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    code = cli.main(["promote", RUN, "-i", str(inventory), "--db", str(db)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exit_codes.BAD_INPUT, err
    assert ran == [promote.FACTS_PLAYBOOK]
    assert len(err) == 1
    assert "node-a: another hardware group: stack " in err[0] and f", the run's {FP}; node-b: " in err[0]
    assert err[0].endswith("node-b: its GPUs are unknown (nvidia-smi-missing)")
