# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""What /proc says about a server's processes: alive, its group and descendants, marked by the sweep."""

from __future__ import annotations

import os

# Every server a sweep starts carries this variable in its environment, set to the sweep's
# results file: a later run finds its servers in /proc even when no in-flight record names them.
SERVER_MARKER = "BWTUNE_SWEEP_RESULTS"


def _proc_stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """(state, ppid, pgrp, session, starttime) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    rest = raw[raw.rfind(b")") + 2 :].split()
    return rest[0].decode(), int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19])


def _proc_environ(pid: int) -> dict[bytes, bytes]:
    """The environment a process started with ({} if gone or not ours to read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0") if entry)
    return {name: value for name, _eq, value in pairs}


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def start_ticks_of(pid: int) -> int | None:
    """The kernel's start time of a live process: with the pid, it names the process for good."""
    st = _proc_stat(pid)
    return None if st is None or st[0] in ("Z", "X") else st[4]


def is_running(pid: int, start_ticks: int | None) -> bool:
    """The process that had this start time still runs (a recycled pid is not it)."""
    return start_ticks is not None and _alive(pid, start_ticks)


def _alive(pid: int, start_ticks: int | None = None) -> bool:
    st = _proc_stat(pid)
    if st is None:
        if start_ticks is not None or os.path.isdir("/proc/self"):
            return False
        try:  # no /proc: fall back to signal 0
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if st[0] in ("Z", "X"):
        return False
    return start_ticks is None or st[4] == start_ticks


def _all_pids() -> list[int]:
    try:
        return [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []


def group_members(pgid: int, leader: int | None = None, min_start: int | None = None) -> set[int]:
    """Live processes of a server: its process group and session, plus the leader's descendants
    (a child that moved to a new group is still found). Processes that started before the
    leader cannot be its children: that excludes a recycled pid."""
    stats = {}
    for pid in _all_pids():
        st = _proc_stat(pid)
        if st is not None and st[0] not in ("Z", "X"):
            stats[pid] = st
    # Linux never hands out a pid still used as a group or session id, so if a process with
    # pid == pgid runs but started at another time, the whole group is someone else's.
    leader_st = stats.get(pgid)
    if min_start is not None and leader_st is not None and leader_st[4] != min_start:
        return set()
    members = {
        pid
        for pid, (_state, _ppid, pgrp, sess, start) in stats.items()
        if (pgrp == pgid or sess == pgid) and (min_start is None or start >= min_start)
    }
    if leader is not None and leader in stats:
        children: dict[int, list[int]] = {}
        for pid, st in stats.items():
            children.setdefault(st[1], []).append(pid)
        todo = [leader]
        while todo:
            p = todo.pop()
            if p in stats and (min_start is None or stats[p][4] >= min_start):
                members.add(p)
                todo.extend(children.get(p, []))
    members.discard(os.getpid())
    return members


def marked_pids(marker: str) -> set[int]:
    """Live processes started with SERVER_MARKER=marker in their environment (servers of one
    results file, and every process they forked)."""
    want = marker.encode()
    found = set()
    for pid in _all_pids():
        if pid == os.getpid():
            continue
        st = _proc_stat(pid)
        if st is None or st[0] in ("Z", "X"):
            continue
        if _proc_environ(pid).get(SERVER_MARKER.encode()) == want:
            found.add(pid)
    return found
