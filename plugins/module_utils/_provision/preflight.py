# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Checks a node must pass before a stack is built: one failure line per missing piece.

Every check takes numbers already read from the node (the module reads them) and returns
lines that carry both the numbers found and the numbers needed, so a user knows what to fix
without reading code. The build's job count is decided here too: memory and cores, not
hope, size it, and a count that would exhaust memory is refused before anything compiles.
"""

from __future__ import annotations

import os
import re

GIB = 1024**3


def version_tuple(text: str) -> tuple[int, ...]:
    """'580.65.06' -> (580, 65, 6); '2.36' -> (2, 36). Non-numeric tails are ignored."""
    parts = []
    for piece in str(text).split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
    return tuple(parts)


def free_bytes(path: str) -> tuple[str, int]:
    """(the existing directory measured, its free bytes) for a path that may not exist yet."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    st = os.statvfs(probe)
    return probe, st.f_bavail * st.f_frsize


def mem_available_bytes(meminfo: str) -> int:
    """MemAvailable from /proc/meminfo text (kB), in bytes."""
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise ValueError("no MemAvailable line in /proc/meminfo")


def build_jobs(
    mem_available: int, cores: int, gib_per_job: float, requested: int | None
) -> tuple[int, str | None]:
    """(job count, failure line or None). requested None = as many as memory and cores allow."""
    fit = int(mem_available // int(gib_per_job * GIB)) if gib_per_job > 0 else cores
    if requested is None:
        jobs = max(0, min(cores, fit))
        if jobs < 1:
            return 0, (
                f"memory: {mem_available / GIB:.1f} GiB available, a build job needs {gib_per_job:g} GiB: "
                "not even one job fits"
            )
        return jobs, None
    if requested > fit:
        return requested, (
            f"memory: {requested} build jobs x {gib_per_job:g} GiB = {requested * gib_per_job:g} GiB, "
            f"only {mem_available / GIB:.1f} GiB available (at most {fit} jobs fit)"
        )
    return requested, None


def check_driver(driver: str | None, minimum: str) -> list[str]:
    if not driver:
        return [f"driver: no NVIDIA driver version found (CUDA 13.0 needs >= {minimum})"]
    if version_tuple(driver) < version_tuple(minimum):
        return [f"driver: {driver} is older than {minimum}, the minimum for CUDA 13.0"]
    return []


def check_gpu(gpu: dict, supported: list[str]) -> list[str]:
    if not gpu.get("available"):
        return [
            f"gpu: no usable GPU ({gpu.get('message') or gpu.get('reason') or 'nvidia-smi gave nothing'})"
        ]
    sm = gpu.get("sm")
    if sm not in supported:
        return [
            f"gpu: {gpu.get('message', '')} is {sm}, supported: {', '.join(supported)}".replace(
                ":  is", ": is"
            )
        ]
    return []


def check_disk(path: str, need_gib: float, what: str) -> list[str]:
    if need_gib <= 0:
        return []
    where, free = free_bytes(path)
    if free < need_gib * GIB:
        return [f"disk: {free / GIB:.1f} GiB free at {where}, {what} needs {need_gib:g} GiB"]
    return []


def check_python(version: str | None, minimum: str) -> list[str]:
    if not version:
        return [f"python: no Python found to build the venv with (needs >= {minimum})"]
    if version_tuple(version) < version_tuple(minimum):
        return [f"python: {version} is older than {minimum}"]
    return []


GLIBC_OVERRIDE = "preflight_accept_glibc_risk"
GLIBC_RISK = (
    "FlashInfer kernels that are not precompiled are JIT-compiled when the server first needs "
    "them, and that compilation can fail there, at server start or mid-run"
)


def check_glibc(version: str | None, below: str, accept_risk: bool = False) -> list[str]:
    """FlashInfer's JIT breaks on glibc >= 2.41 (docs/provisioning.md).

    The refusal names its override (GLIBC_OVERRIDE); with accept_risk the same finding is a
    warning (glibc_warning), not a failure.
    """
    if not version:
        return ["glibc: version unknown (not a glibc system?)"]
    if below and version_tuple(version) >= version_tuple(below) and not accept_risk:
        return [
            f"glibc: {version} is >= {below}, where FlashInfer's JIT compilation breaks; "
            f"set {GLIBC_OVERRIDE}: true to build anyway, taking the risk ({GLIBC_RISK})"
        ]
    return []


def glibc_warning(version: str | None, below: str, accept_risk: bool) -> str | None:
    """The warning for a glibc the check would refuse, when the user accepted the risk."""
    if accept_risk and version and below and version_tuple(version) >= version_tuple(below):
        return f"glibc: {version} is >= {below}, accepted by {GLIBC_OVERRIDE}: {GLIBC_RISK}"
    return None


def nearest_existing(path: str) -> str:
    """`path`, or its nearest parent that exists (what creating it would write into)."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    return probe


def check_writable(path: str, what: str, user: str, access=os.access) -> list[str]:
    """The node's user must be able to create `path` (or write into it): else one line
    naming the path and the two ways out (become root, or own the directory). A leading
    `~` is the node user's home (the keys of stack_preflight's `writable`, a dict, cannot
    be argspec paths)."""
    path = os.path.expanduser(path)
    where = nearest_existing(path)
    if os.path.isdir(where) and access(where, os.W_OK | os.X_OK):
        return []
    shown = path if where == os.path.abspath(path) else f"{path} (its parent {where})"
    return [
        f"permission: {shown} is not writable by {user}, and {what} goes there; "
        f"set provision_become: true (or ansible_become) to provision as root, "
        f"or make {user} own {where}"
    ]


def check_cores(cores: int, minimum: int) -> list[str]:
    if cores < minimum:
        return [f"cores: {cores} online, the build needs at least {minimum}"]
    return []
