# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The locks a sweep holds: its results file (one sweep per run) and its node (one sweep per node)."""

from __future__ import annotations

import os

from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_state
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_core import now
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_failures import SweepFailed
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_request import SweepOptions


def lock_results(results_path: str) -> int:
    """Hold the results file for this sweep: a second sweep on it would stop our servers.

    The lock is the kernel's (flock), so it goes with the process, killed or not.
    """
    try:
        fd = sweep_state.hold_results(results_path)
    except OSError as exc:
        raise SweepFailed(
            "cannot write %s: %s" % (exc.filename or results_path, exc.strerror or exc)
        ) from None
    if fd is None:
        progress = sweep_state.read_progress(results_path) or {}
        run_id = progress.get("run_id") or os.path.basename(os.path.dirname(results_path))
        raise SweepFailed(
            "run %s is still running on this node (sweep pid %s, results %s): follow it, or "
            "cancel it (bwtune cancel %s), before you start it again"
            % (run_id, progress.get("pid") or "unknown", results_path, run_id)
        )
    return fd


def lock_node(options: SweepOptions) -> int:
    """One sweep per node: a second one would race ours for ports and GPU memory."""
    holder = {
        "run_id": options.run_id,
        "pid": os.getpid(),
        "results_path": options.results_path,
        "started_at": now(),
    }
    try:
        fd, other = sweep_state.hold_node(options.node_lock_path, holder)
    except OSError as exc:
        raise SweepFailed("cannot write %s: %s" % (options.node_lock_path, exc.strerror or exc)) from None
    if fd is None:
        raise SweepFailed(
            "another sweep is running on this node: run %s (sweep pid %s, since %s, results %s); "
            "a node runs one sweep at a time (its servers would race for ports and GPU memory): "
            "wait for it or cancel it (bwtune cancel %s)"
            % (
                other.get("run_id", "?"),
                other.get("pid", "?"),
                other.get("started_at", "?"),
                other.get("results_path", "?"),
                other.get("run_id", "RUN"),
            )
        )
    return fd
