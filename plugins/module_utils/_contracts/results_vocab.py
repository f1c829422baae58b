# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The results contract's words: schema versions, statuses, strategies, run ids, the objective."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_fields

# --------------------------------------------------------------------------- versions

# A results line's `schema` (declared with the fields: results_fields.SCHEMA_VERSION).
SCHEMA_VERSION = results_fields.SCHEMA_VERSION
# The `schema` key of every `--json` output of the CLI (runs, report, export, sweep, ...).
OUTPUT_SCHEMA_VERSION = 1


def versioned(output: Mapping[str, Any]) -> dict[str, Any]:
    """A `--json` document with its schema version as the first key."""
    return {"schema": OUTPUT_SCHEMA_VERSION, **{k: v for k, v in output.items() if k != "schema"}}


# --------------------------------------------------------------------------- statuses

OK = "ok"
# Plan decisions: recorded so the results file is the whole plan, never launched, never failures.
PRUNED = "pruned"
DUPLICATE = "duplicate"
# Failure classes of a launched config.
INVALID_ARGS = "invalid-args"
UNSUPPORTED_HARDWARE = "unsupported-hardware"
OOM = "oom"
STARTUP_TIMEOUT = "startup-timeout"
CRASHED = "crashed"
WRONG_OUTPUT = "wrong-output"
AUTH_FAILED = "auth-failed"  # the server answered HTTP 401/403: the API key, not the config

NOT_LAUNCHED = (PRUNED, DUPLICATE)
# What the launcher's log classifier can conclude about a server that never became healthy.
STARTUP_FAILURES = (INVALID_ARGS, UNSUPPORTED_HARDWARE, OOM, STARTUP_TIMEOUT, CRASHED)
# A launched config that produced no usable measurement: these, and only these, are "failed".
LAUNCH_FAILURES = (*STARTUP_FAILURES, WRONG_OUTPUT, AUTH_FAILED)
# Every class a line's `failure.class` may name (a not-launched line carries the planner's why).
FAILURE_CLASSES = (*NOT_LAUNCHED, *LAUNCH_FAILURES)
STATUSES = (OK, *FAILURE_CLASSES)
# Not a class: a launch that loses a port race is retried on another port, never recorded
# as the config's failure.


def is_failed(status: Any) -> bool:
    """A launched config that failed (pruned, duplicate and screened-out lines are not)."""
    return status in LAUNCH_FAILURES


def is_launched(status: Any) -> bool:
    return status not in NOT_LAUNCHED


def outcome_counts(lines: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """{"ok", "screened_out", "failed": {class: n}, "not_launched": {class: n}} of some lines.

    A screened-out config is ok (it ran fine; the screen found it not worth the full
    workloads) and is counted in both "ok" and "screened_out".
    """
    ok = screened = 0
    failed: dict[str, int] = {}
    not_launched: dict[str, int] = {}
    for line in lines:
        status = line.get("status")
        if status == OK:
            ok += 1
            screened += bool(line.get("screened_out"))
        elif status in NOT_LAUNCHED:
            not_launched[str(status)] = not_launched.get(str(status), 0) + 1
        else:
            failed[str(status)] = failed.get(str(status), 0) + 1
    return {
        "ok": ok,
        "screened_out": screened,
        "failed": dict(sorted(failed.items())),
        "not_launched": dict(sorted(not_launched.items())),
    }


# --------------------------------------------------------------------------- strategies

# The names; the implementations are in strategies.py.
STRATEGIES = ("grid", "coordinate", "screen", "adaptive")
# adaptive: a quarter of the grid's GPU-hours on the mission matrix, and finds the best
# config as often (docs/benchmarks.md, "Search cost").
DEFAULT_STRATEGY = "adaptive"
# The name of the screening workload in a line's metrics (strategies "screen", "adaptive").
SCREEN_WORKLOAD = "screen"


# --------------------------------------------------------------------------- run ids

RUN_ID_MAX_LENGTH = 128
# A run id names a directory (runs/<id>/, the node's results folder): one path component
# that cannot climb (`..`), hide (leading dot), look like an option or hold odd characters.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+@-]*")


def run_id_problem(run_id: Any) -> str | None:
    """Why `run_id` is not a valid run id, or None when it is."""
    if not isinstance(run_id, str) or not run_id:
        return "a run id is a non-empty string"
    if len(run_id) > RUN_ID_MAX_LENGTH:
        return "a run id has at most %d characters" % RUN_ID_MAX_LENGTH
    if not _RUN_ID.fullmatch(run_id):
        return "a run id starts with a letter or digit and holds only letters, digits and . _ - + : @"
    return None


def check_run_id(run_id: Any, where: str = "run id") -> str:
    """`run_id` when valid, else ValueError naming `where` and the value."""
    problem = run_id_problem(run_id)
    if problem:
        raise ValueError("%s %r: not a run id (%s)" % (where, run_id, problem))
    return str(run_id)


# --------------------------------------------------------------------------- objective

# Without an `objective` in the matrix, configs are ranked by output_throughput (max) on the
# first workload: sglang.bench_serving's headline figure, meaningful at every concurrency
# (a per-request decode rate only says something about a lightly loaded server), and the
# one results databases already recorded for runs without an objective.
DEFAULT_METRIC = "output_throughput"
GOALS = ("max", "min")
DEFAULT_GOAL = "max"


def normalize_objective(objective: Any, workloads: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """{"workload", "metric", "goal"} with the defaults filled in; ValueError on a bad one.

    The workload defaults to the first of `workloads` (None when none is known yet).
    """
    if objective is None:
        objective = {}
    if not isinstance(objective, Mapping):
        raise ValueError("objective must be a mapping with workload, metric, goal; got %r" % (objective,))
    goal = objective.get("goal") or DEFAULT_GOAL
    if goal not in GOALS:
        raise ValueError("objective goal %r must be 'max' or 'min'" % (goal,))
    workload = objective.get("workload")
    if not workload and workloads:
        workload = workloads[0].get("name")
    return {"workload": workload or None, "metric": objective.get("metric") or DEFAULT_METRIC, "goal": goal}


def objective_of(matrix: Mapping[str, Any]) -> dict[str, Any]:
    """The matrix's objective (or the default) with its workload resolved."""
    workloads = [w for w in matrix.get("workloads") or [] if isinstance(w, Mapping)]
    return normalize_objective(matrix.get("objective"), workloads)
