# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Whose socket listens on a server's port: a port another process took is a lost race, not a failure."""

from __future__ import annotations

import os

from ansible_collections.bwtune.sglang.plugins.module_utils._server.proc_scan import group_members
from ansible_collections.bwtune.sglang.plugins.module_utils._server.server_process import ServerHandle

# wait_healthy's failure class for a port another process answers on: not a failure of the
# config, a lost port race (the sweep starts the config again on another port).
PORT_TAKEN = "port-taken"
_TCP_LISTEN = "0A"


def _listening_inodes(port: int) -> set[str] | None:
    """Socket inodes listening on `port` (any address) in this network namespace; None when
    /proc cannot say (no /proc/net/tcp)."""
    inodes: set[str] = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for row in rows:
            fields = row.split()
            if len(fields) < 10 or fields[3] != _TCP_LISTEN:
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[9] != "0":
                inodes.add(fields[9])
    return inodes if readable else None


def listener_is_ours(handle: ServerHandle) -> bool | None:
    """Whether the socket listening on the server's port belongs to the server (its process
    group, session or descendants). False: another process answers there, and a health check
    would measure it; None: /proc cannot tell (nothing listens yet, or no /proc)."""
    inodes = _listening_inodes(handle.port)
    if not inodes:
        return None
    wanted = {"socket:[%s]" % inode for inode in inodes}
    for pid in group_members(handle.pgid, handle.pid, handle.start_ticks) | {handle.pid}:
        fd_dir = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in wanted:
                    return True
            except OSError:
                continue
    return False
