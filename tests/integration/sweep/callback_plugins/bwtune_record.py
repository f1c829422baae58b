"""Test-only callback: every task result and the play's custom stats, one JSON line each.

Enabled by the sweep playbook tests (ANSIBLE_CALLBACKS_ENABLED=bwtune_record), which read
what the playbook's tasks returned from the file named by BWTUNE_TEST_EVENTS instead of
parsing the screen output.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ansible.plugins.callback import CallbackBase

EVENTS_ENV = "BWTUNE_TEST_EVENTS"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bwtune_record"
    CALLBACK_NEEDS_ENABLED = True

    def _write(self, event: dict[str, Any]) -> None:
        path = os.environ.get(EVENTS_ENV)
        if path:
            with open(path, "a") as out:
                out.write(json.dumps(event, default=str) + "\n")

    def _task_event(self, event: str, result: Any) -> None:
        self._write(
            {
                "event": event,
                "task": result.task_name,
                "host": result._host.get_name(),
                "result": result._result,
            }
        )

    def v2_runner_on_ok(self, result: Any) -> None:
        self._task_event("ok", result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._task_event("failed", result)

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._task_event("skipped", result)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._write({"event": "stats", "custom": stats.custom})
