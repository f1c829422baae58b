# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The fields of a sweep's progress file, declared once (issue 22).

A running sweep rewrites ``<results>.progress.json`` at every phase change (the writer:
sweep_state.Progress); the ``sweep_progress`` module returns part of it as its
``progress`` (the view: VIEW); the controller's live view keeps part of that per host
(the reader: bwtune.progress.HostProgress, the LIVE fields, read with ``live_values``).
Each field has one entry in FIELDS: its name, its kind, the value a new sweep writes, who
reads it beyond the node, and one line of documentation. The writer, the view and the
reader are derived from it; tests/unit/sweep/test_progress_fields.py holds the three to it.

Add a field here before the sweep writes it. Standard library only: it runs under the
node's system Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# What a field holds (documented; the live view's reader coerces by it).
KINDS: dict[str, str] = {
    "run id": "string: the run id",
    "pid": "int: a process id",
    "ticks": "int or null: the process's start time in clock ticks since boot (/proc)",
    "text": "string or null",
    "time": "number: seconds since the epoch",
    "count": "int",
    "count or null": "int, or null while not known",
    "current": "object (CURRENT) or null between launches",
    "seconds": "number or null: seconds",
    "bool": "true or false",
    "outcome": "object (the node outcome, node_outcome.FIELDS) or null until finished",
}


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    initial: Any  # what a new sweep writes before its first launch (None: the writer's value)
    view: bool  # the sweep_progress module returns it in `progress`
    live: bool  # the controller's live view keeps it per host (a view field too)
    doc: str


FIELDS: tuple[Field, ...] = (
    Field("run_id", "run id", None, True, False, "The run the sweep measures."),
    Field("pid", "pid", None, False, False,
          "The sweep process: a follower tells a live sweep from a dead one."),
    Field("pid_start_time", "ticks", None, False, False,
          "That process's start time, so a cancel never signals a recycled pid."),
    Field("async_job", "text", None, False, False,
          "The Ansible async job the sweep runs in (who wrote this file, by identity)."),
    Field("boot_id", "text", None, False, False,
          "The boot the sweep runs in (a file of an earlier boot is old)."),
    Field("started_at", "time", None, False, False, "When the sweep started: for people, never compared."),
    Field("planned", "count or null", None, True, True, "The launches the sweep plans to make."),
    Field("done", "count", 0, True, True, "The launches made."),
    Field("failed", "count", 0, True, True, "The launches that failed."),
    Field("current", "current", None, True, True, "The launch in flight and its phase (CURRENT), else null."),
    Field("eta_s", "seconds", None, True, True,
          "Seconds left, from the mean launch so far; 0 once finished."),
    Field("finished", "bool", False, False, False, "The sweep ended and wrote its outcome."),
    Field("result", "outcome", None, False, False, "The sweep's outcome (node_outcome) once finished."),
)  # fmt: skip

NAMES = tuple(f.name for f in FIELDS)
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
# What the sweep_progress module returns as `progress`, in this order.
VIEW = tuple(f.name for f in FIELDS if f.view)
# What the controller's live view keeps of it (bwtune.progress.HostProgress has these attributes).
LIVE = tuple(f.name for f in FIELDS if f.live)
# The keys of `current` (what `current()` builds, in this order): the config in flight, its
# phase (sweep_state.PHASES) and, in the workload phase, which workload of how many.
CURRENT = ("config", "phase", "workload", "workloads")


def new(**values: Any) -> dict[str, Any]:
    """A new sweep's progress record: every field, the given values over the initial ones."""
    unknown = sorted(set(values) - set(NAMES))
    if unknown:
        raise KeyError("not a progress field: %s" % ", ".join(unknown))
    return {f.name: values.get(f.name, f.initial) for f in FIELDS}


def current(config: str, phase: str, workload: int = 0, workloads: int = 0) -> dict[str, Any]:
    """The `current` of a launch in flight."""
    return {"config": config, "phase": phase, "workload": workload, "workloads": workloads}


def view(progress: dict[str, Any] | None) -> dict[str, Any]:
    """The module's `progress`: the VIEW fields of a progress record (null when missing)."""
    progress = progress or {}
    return {name: progress.get(name) for name in VIEW}


def live_values(report: dict[str, Any]) -> dict[str, Any]:
    """The LIVE fields of a module's `progress`, each coerced by its kind, for the live view.
    A `planned` that is not yet an int is left out (the view keeps what it knew)."""
    values: dict[str, Any] = {}
    for name in LIVE:
        kind, value = BY_NAME[name].kind, report.get(name)
        if kind == "count or null":
            if isinstance(value, int):
                values[name] = value
        elif kind == "count":
            values[name] = int(value or 0)
        elif kind == "current":
            values[name] = value if isinstance(value, dict) else None
        elif kind == "seconds":
            values[name] = float(value) if isinstance(value, (int, float)) else None
        else:  # a kind the live view has no reader for: a test fails first
            raise ValueError("%s: no live reader for kind %r" % (name, kind))
    return values


def problems() -> list[str]:
    """What is inconsistent in the table itself (a test asserts there is nothing)."""
    found = []
    if len(set(NAMES)) != len(NAMES):
        found.append("a field name is declared twice")
    for f in FIELDS:
        if f.kind not in KINDS:
            found.append("%s: unknown kind %r" % (f.name, f.kind))
        if f.live and not f.view:
            found.append("%s: the live view reads only what the module returns (view)" % f.name)
    return found
