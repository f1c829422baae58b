# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Is the SGLang unit serving? Wait for /health_generate; if not, say why from its journal.

The failure classes are the sweep's (`failure_classifier.classify_failure`): a unit that exited is
`invalid-args`, `unsupported-hardware`, `oom` or `crashed`; one still starting at the deadline
is `startup-timeout`.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._server.health_wait import http_status
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.failure_classifier import classify_failure

JOURNAL_LINES = 50
CLASSIFY_LINES = 400  # the classifier reads further back than is shown (the sweep reads 400 too)
# States in which the unit's process is gone (systemd shows `auto-restart` between restarts).
_EXITED_SUBSTATES = ("failed", "auto-restart", "dead", "exited")


def read_env_value(path: str, name: str) -> str | None:
    """`NAME=value` from a systemd EnvironmentFile (no quoting is written by the role)."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                key, eq, value = line.rstrip("\n").partition("=")
                if eq and key.strip() == name:
                    return value
    except OSError:
        return None
    return None


def unit_state(unit: str, systemctl: str = "systemctl") -> dict[str, str]:
    """ActiveState, SubState, ExecMainStatus, ... of a unit (`systemctl show`)."""
    props = "ActiveState,SubState,ExecMainStatus,ExecMainCode,NRestarts,MainPID,InvocationID"
    out = subprocess.run(
        [systemctl, "show", unit, "--property", props], capture_output=True, text=True, check=False
    ).stdout
    state = {}
    for line in out.splitlines():
        key, _sep, value = line.partition("=")
        state[key] = value
    return state


def journal_tail(unit: str, lines: int = JOURNAL_LINES, journalctl: str = "journalctl") -> list[str]:
    """The unit's last `lines` log lines of its latest invocation (message text only)."""
    argv = [journalctl, "--unit", unit, "--lines", str(lines), "--no-pager", "--output", "cat"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[-lines:]


def exited(state: dict[str, str]) -> bool:
    return state.get("ActiveState") in ("failed", "inactive") or state.get("SubState") in _EXITED_SUBSTATES


def wait_serving(
    unit: str,
    host: str,
    port: int,
    *,
    timeout_s: float,
    poll_s: float = 1.0,
    journal_lines: int = JOURNAL_LINES,
    state_of: Callable[[str], dict[str, str]] = unit_state,
    journal_of: Callable[[str, int], list[str]] = journal_tail,
    status_of: Callable[[str, int, str, float], int] = http_status,
) -> dict[str, Any]:
    """{healthy, elapsed_s, failure: {class, message, log_tail} | None}.

    Gives up at once when the unit's process is gone (classified from the journal), else at
    the deadline (`startup-timeout`).
    """
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    restarts = None
    while True:
        state = state_of(unit)
        # A crash loop (Restart=on-failure) may be caught between attempts or in a new one.
        crashed_since = restarts is not None and state.get("NRestarts", restarts) != restarts
        restarts = state.get("NRestarts") if restarts is None else restarts
        if exited(state) or crashed_since:
            tail = journal_of(unit, max(journal_lines, CLASSIFY_LINES))
            code = state.get("ExecMainStatus")
            rc = int(code) if code and code.lstrip("-").isdigit() else None
            cls, msg = classify_failure(tail, exited=True, returncode=rc)
            return _failed(t0, cls, msg, tail[-journal_lines:], state)
        left = deadline - time.monotonic()
        if left <= 0:
            tail = journal_of(unit, max(journal_lines, CLASSIFY_LINES))
            cls, msg = classify_failure(tail, exited=False, returncode=None)
            msg = f"not healthy after {timeout_s:g} s" + (f" ({msg})" if msg else "")
            return _failed(t0, cls, msg, tail[-journal_lines:], state)
        if status_of(host, port, "/health_generate", min(60.0, max(1.0, left))) == 200:
            return {"healthy": True, "elapsed_s": round(time.monotonic() - t0, 3), "failure": None}
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))


def _failed(t0: float, cls: str, msg: str, tail: list[str], state: dict[str, str]) -> dict[str, Any]:
    return {
        "healthy": False,
        "elapsed_s": round(time.monotonic() - t0, 3),
        "failure": {"class": cls, "message": msg, "log_tail": tail},
        "unit": {k: state.get(k) for k in ("ActiveState", "SubState", "ExecMainStatus", "NRestarts")},
    }
