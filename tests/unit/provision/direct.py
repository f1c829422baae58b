"""Run one of the collection's modules as Ansible runs it on a node: a Python process with
its arguments in a JSON file, the result on stdout (no ansible-playbook: fast)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def argv(module: str, args: dict[str, Any], tmp: Path) -> list[str]:
    path = tmp / f"{module}-args-{len(list(tmp.glob(f'{module}-args-*.json')))}.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    return [sys.executable, "-m", f"ansible_collections.bwtune.sglang.plugins.modules.{module}", str(path)]


def run(module: str, args: dict[str, Any], tmp: Path, timeout: float = 120) -> dict[str, Any]:
    proc = subprocess.run(argv(module, args, tmp), capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise AssertionError(f"{module} printed no result (rc {proc.returncode}): {proc.stdout}{proc.stderr}")
    return json.loads(lines[-1])
