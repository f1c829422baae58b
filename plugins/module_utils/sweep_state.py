# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The running sweep's progress file, beside its results file on the node.

The sweep process rewrites ``<results>.progress.json`` atomically at every phase
change; ``sweep_progress`` (and so the controller's live view) reads it. It also
names the sweep's pid and that process's start time, so a reader can tell a live
sweep from a dead one and a cancel never signals a recycled pid.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any, Dict, Optional

from ansible_collections.bwtune.sglang.plugins.module_utils import launcher, results_file

PHASES = ("planning", "starting", "gate", "workload", "stopping", "done")


def progress_path(results_path: str) -> str:
    return results_path + ".progress.json"


def is_same_process(pid: Optional[int], start_ticks: Optional[int]) -> bool:
    return bool(pid) and launcher.is_running(int(pid or 0), start_ticks)


def read_json(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path) as src:
            data = json.load(src)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class Progress:
    """What the sweep process tells its followers; one per sweep process."""

    def __init__(self, results_path: str, run_id: str, planned: int) -> None:
        self.path = progress_path(results_path)
        pid = os.getpid()
        self.data: Dict[str, Any] = {
            "run_id": run_id,
            "pid": pid,
            "pid_start_time": launcher.start_ticks_of(pid),
            "started_at": time.time(),
            "planned": planned,
            "done": 0,
            "failed": 0,
            "current": None,
            "eta_s": None,
            "finished": False,
            "result": None,
        }
        self._launch_seconds: list = []
        self.save()

    def save(self) -> None:
        results_file.write_json_atomic(self.path, self.data)

    def phase(self, config_id: str, phase: str, workload: int = 0, workloads: int = 0) -> None:
        self.data["current"] = {
            "config": config_id,
            "phase": phase,
            "workload": workload,
            "workloads": workloads,
        }
        self.save()

    def config_done(self, failed: bool, seconds: float, planned: Optional[int] = None) -> None:
        self.data["done"] += 1
        self.data["failed"] += int(failed)
        if planned is not None:
            self.data["planned"] = planned
        self._launch_seconds.append(seconds)
        left = max(self.data["planned"] - self.data["done"], 0)
        mean = sum(self._launch_seconds) / len(self._launch_seconds)
        self.data["eta_s"] = round(left * mean, 1)
        self.data["current"] = None
        self.save()

    def finish(self, result: Dict[str, Any]) -> None:
        self.data.update(finished=True, current=None, eta_s=0, result=result)
        self.save()


def read_progress(results_path: str) -> Optional[Dict[str, Any]]:
    return read_json(progress_path(results_path))


def cancel(results_path: str, timeout_s: float = 120.0) -> Dict[str, Any]:
    """SIGTERM the sweep process named in the progress file and wait for it to end.

    The sweep stops its server and exits on SIGTERM; its results file keeps every
    config finished before. Returns what was done, for the module's result.
    """
    progress = read_progress(results_path)
    if not progress or progress.get("finished"):
        return {"cancelled": False, "reason": "no running sweep"}
    pid, start = int(progress.get("pid") or 0), progress.get("pid_start_time")
    if not is_same_process(pid, start):
        return {"cancelled": False, "reason": "the sweep process (pid %s) is not running" % pid}
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and is_same_process(pid, start):
        time.sleep(0.2)
    killed = is_same_process(pid, start)
    if killed:
        os.kill(pid, signal.SIGKILL)
    # A killed sweep could not stop its server: stop it from the in-flight record.
    leftover = launcher.stop_leftover(results_file.ResultsFile(results_path).inflight_path)
    return {"cancelled": True, "killed": killed, "pid": pid, "leftover_stopped": leftover}
