# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Wait until a started server is healthy and ready, or say why it is not (class and message)."""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass

# Failure classes are the results contract's. AUTH_FAILED: a server refused the client's
# credentials (HTTP 401/403): the sweep's API key is not the server's, never "wrong-output".
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_contract import AUTH_FAILED
from ansible_collections.bwtune.sglang.plugins.module_utils._server.port_owner import (
    PORT_TAKEN,
    listener_is_ours,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._server.server_logs import (
    CLASSIFY_TAIL_LINES,
    classify_failure,
    log_tail,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._server.server_process import ServerHandle


@dataclass
class HealthResult:
    ok: bool
    elapsed_s: float
    failure_class: str | None = None
    message: str = ""


def http_status(host: str, port: int, path: str, timeout: float, api_key: str | None = None) -> int:
    """The HTTP status of GET `path`, 0 when nothing answers (the sweep and the server role share it)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        conn.close()


def wait_healthy(
    handle: ServerHandle,
    *,
    timeout_s: float,
    poll_s: float = 0.5,
    api_key: str | None = None,
) -> HealthResult:
    """Wait for GET /health then GET /health_generate to answer 200.

    Fails fast when the process exits (classified from its log) and gives up after timeout_s.
    Marks the phases it sees on `handle.cold_start` (listening, health, ready; failed).
    """
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    health_ok = False
    cold = handle.cold_start

    def failed(cls: str | None, msg: str) -> HealthResult:
        cold.mark_failed()
        return HealthResult(False, time.monotonic() - t0, cls, msg)

    while True:
        code = handle.exit_code()
        if code is not None:
            cls, msg = classify_failure(
                log_tail(handle.log_path, CLASSIFY_TAIL_LINES), exited=True, returncode=code
            )
            return failed(cls, msg)
        left = deadline - time.monotonic()
        if left <= 0:
            cls, msg = classify_failure(
                log_tail(handle.log_path, CLASSIFY_TAIL_LINES), exited=False, returncode=None
            )
            if cls == "startup-timeout":
                msg = (
                    f"not healthy after {timeout_s:g} s ({msg})"
                    if msg
                    else f"not healthy after {timeout_s:g} s"
                )
            return failed(cls, msg)
        if not health_ok:
            status = http_status(handle.host, handle.port, "/health", min(5.0, left), api_key)
            if status != 0:
                cold.mark("listening")
            # 404: a server without /health; /health_generate decides.
            health_ok = status in (200, 404)
            if health_ok and listener_is_ours(handle) is False:
                # Another process took the port after it was chosen and answers while this
                # server still loads: measuring it would give this config its numbers.
                return failed(PORT_TAKEN, "another process answers on port %d" % handle.port)
            if status == 200:
                cold.mark("health")
        if health_ok:
            path = "/health_generate"
            status = http_status(handle.host, handle.port, path, min(60.0, left), api_key)
            if status == 200:
                cold.mark("health")
                # /health* answer without a key: ask one route that needs it.
                path = "/v1/models"
                status = http_status(handle.host, handle.port, path, min(60.0, left), api_key)
            if status in (401, 403):
                message = auth_message(status, path, api_key)
                return failed(AUTH_FAILED, message)
            if status != 0 and path == "/v1/models":
                cold.mark("ready")
                return HealthResult(True, time.monotonic() - t0)
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))


def auth_message(status: int, path: str, api_key: str | None) -> str:
    sent = "with the sweep's API key" if api_key else "without an API key"
    return (
        f"HTTP {status} on {path} {sent}: the server wants another key; set it in sweep_api_key"
        " (never in the matrix or the launch command)"
    )
