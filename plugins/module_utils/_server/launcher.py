# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The sweep's launcher, one name for its parts: start, wait healthy, classify, stop for sure.

A server runs as its own process group and session (start_new_session), so stopping it
reaches every scheduler and detokenizer process it forked. Stopping is verified: no process
of the group left, the port closed, and the GPU memory its processes held released
(nvidia-smi). Anything left behind raises OrphanError: that is a failure of the sweep, not
of the config, because the next launch would run on a dirty GPU. The code lives in
server_process (start, stop), health_wait, port_owner, proc_scan, server_logs, log_masker,
cold_start and startup_caches; this module re-exports what the sweep and its tests call.
"""

from __future__ import annotations

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.cold_start import ColdStart
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.startup_caches import (
    STARTUP_CACHE_LAYOUT,
    startup_cache_env,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._server.health_wait import (
    HealthResult,
    auth_message,
    http_status,
    wait_healthy,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._server.log_masker import (
    MASKER_SOURCE,
    private_dirs,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._server.port_owner import (
    PORT_TAKEN,
    listener_is_ours,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._server.proc_scan import (
    SERVER_MARKER,
    group_members,
    is_running,
    marked_pids,
    start_ticks_of,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._server.server_logs import (
    CLASSIFY_TAIL_LINES,
    LOG_TAIL_LINES,
    address_in_use,
    classify_failure,
    launch_log_path,
    log_tail,
    lost_port,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._server.server_process import (
    OrphanError,
    ServerHandle,
    StopResult,
    find_leftover,
    gpu_processes,
    port_open,
    start_server,
    stop_leftover,
    stop_server,
)

__all__ = [
    "CLASSIFY_TAIL_LINES",
    "LOG_TAIL_LINES",
    "MASKER_SOURCE",
    "PORT_TAKEN",
    "SERVER_MARKER",
    "STARTUP_CACHE_LAYOUT",
    "ColdStart",
    "HealthResult",
    "OrphanError",
    "ServerHandle",
    "StopResult",
    "address_in_use",
    "auth_message",
    "classify_failure",
    "find_leftover",
    "gpu_processes",
    "group_members",
    "http_status",
    "is_running",
    "launch_log_path",
    "listener_is_ours",
    "log_tail",
    "lost_port",
    "marked_pids",
    "port_open",
    "private_dirs",
    "start_server",
    "start_ticks_of",
    "startup_cache_env",
    "stop_leftover",
    "stop_server",
    "wait_healthy",
]
