"""The task the CLI follows has one owner (issue 22): `bwtune.progress.FOLLOW_TASK`. The
role and the attach playbook hold the name as a literal (Ansible task names are); here they
are held to the constant, so renaming one side alone fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bwtune import progress
from bwtune.app import sweep_service

REPO = Path(__file__).resolve().parents[3]


def _tasks(node: Any) -> list[dict[str, Any]]:
    """Every task of a tasks file or playbook, those in blocks and plays too."""
    found = []
    for item in node if isinstance(node, list) else []:
        if not isinstance(item, dict):
            continue
        found.append(item)
        for key in ("tasks", "pre_tasks", "post_tasks", "block", "rescue", "always"):
            found += _tasks(item.get(key))
    return found


@pytest.mark.parametrize("path", ["roles/sweep/tasks/sweep.yml", "playbooks/sweep_attach.yml"])
def test_the_followed_task_is_named_by_the_constant(path: str) -> None:
    """The one task that polls the sweep (sweep_progress, retried until it ends) is the one
    the CLI reads by name."""
    tasks = _tasks(yaml.safe_load((REPO / path).read_text(encoding="utf-8")))
    polls = [t.get("name") for t in tasks if "retries" in t and "bwtune.sglang.sweep_progress" in t]
    assert polls == [progress.FOLLOW_TASK]


def test_the_sweep_command_reads_the_one_constant() -> None:
    assert sweep_service.FOLLOW_TASK is progress.FOLLOW_TASK
