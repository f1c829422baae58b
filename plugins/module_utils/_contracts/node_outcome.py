# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The outcome of a node's sweep, declared once (issue 22).

What the sweep module returns when it ends (and keeps in its progress file's ``result``),
what ``sweep_progress`` returns as ``result``, what the sweep role records for the
controller (``set_stats`` key ``bwtune_sweep``), what the ``sweep_summary`` filter prints
and what ``bwtune sweep`` stores (bwtune.app.sweep_service ``node_results``). Each key has one
entry in FIELDS (its kind, in which outcomes it is always present, its meaning) and one
entry in SUMMARY for the keys of a finished sweep's ``summary``. The builders below make
every outcome the node returns, the readers are how the filter and the controller read
one; tests/unit/sweep/test_node_outcome.py holds all of them to this table.

Standard library only: it runs under the node's system Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The ways a sweep ends, as the outcome tells them.
FINISHED = "finished"  # the sweep returned (ran to its end, or stopped itself: then `error`)
FAILED = "failed"  # the sweep module failed (bad input, a lock held, a write that failed)
DIED = "died"  # the sweep process ended without a result (killed)
TIMED_OUT = "timed out"  # Ansible's async wrapper killed it at its limit
ENDS = (FINISHED, FAILED, DIED, TIMED_OUT)


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    always: tuple[str, ...]  # the ends (ENDS) whose outcome always has the key
    doc: str


FIELDS: tuple[Field, ...] = (
    Field("results", "list of results lines", (FINISHED, DIED, TIMED_OUT),
          "Every line of the run the node holds, in the order written (a failed module: the "
          "lines it had, when it had any)."),
    Field("best", "a results line or null", (FINISHED,),
          "The best config's line by the objective, null when none was measured ok."),
    Field("summary", "object (SUMMARY)", (FINISHED,),
          "The run's counts, its objective and where its results are."),
    Field("error", "string or null", ENDS,
          "Why the sweep did not finish; null when it did. The host fails when it is set."),
    Field("leftover_stopped", "object or null", (DIED, TIMED_OUT),
          "The server a dead or killed sweep left running, which the follower stopped."),
    Field("timed_out", "true", (TIMED_OUT,), "The async limit (sweep_async_s) ended the sweep."),
)  # fmt: skip

NAMES = tuple(f.name for f in FIELDS)
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}


def always(end: str) -> tuple[str, ...]:
    """The keys an outcome of that end always has, in FIELDS' order."""
    return tuple(f.name for f in FIELDS if end in f.always)


# The keys of a finished sweep's `summary` (plugins/module_utils/_sweep/sweep_runner.py builds it).
SUMMARY: tuple[tuple[str, str], ...] = (
    ("run_id", "The run."),
    ("strategy", "The strategy that chose the launches (grid, screen, adaptive, ...)."),
    ("planned_configs", "The plan's configs, launched or not."),
    ("valid_configs", "The plan's launches (configs not pruned, not duplicates)."),
    ("launches", "Launches this sweep made."),
    ("resumed", "Configs an earlier sweep of the run had finished (a resume skips them)."),
    ("saved_launches", "Launches the strategy saved (valid configs it did not launch, not resumed)."),
    ("screened_out", "Configs measured on the screening workload only."),
    ("by_status", "Configs by status of their latest line."),
    ("objective", "What the run ranks by: workload, metric, goal."),
    ("simulated", "Measured on bwtune-standin, not SGLang."),
    ("leftover_stopped", "A server an earlier, dead sweep of this file left running, stopped first."),
    ("results_path", "The results file on the node."),
    ("warnings", "What the sweep repaired or skipped, one line each (Ansible warnings too)."),
    ("left_out", "A finished run: the plan's launches the strategy left out (config, point)."),
    ("not_reached", "A run that stopped (error): the plan's launches it did not reach (config, point)."),
)
SUMMARY_NAMES = tuple(name for name, _doc in SUMMARY)
# A summary has one of these, never both: which depends on whether the sweep finished.
UNLAUNCHED = ("left_out", "not_reached")


# --------------------------------------------------------------------------- builders


def make_summary(**values: Any) -> dict[str, Any]:
    """A finished sweep's summary: every SUMMARY key, one of UNLAUNCHED, nothing else."""
    given = set(values)
    unknown = sorted(given - set(SUMMARY_NAMES))
    missing = sorted(set(SUMMARY_NAMES) - set(UNLAUNCHED) - given)
    if unknown or missing or len(given & set(UNLAUNCHED)) != 1:
        raise KeyError(
            "a sweep summary: unknown %s, missing %s, needs one of %s"
            % (unknown, missing, ", ".join(UNLAUNCHED))
        )
    return {name: values[name] for name in SUMMARY_NAMES if name in values}


def finished(
    results: list, best: dict[str, Any] | None, summary: dict[str, Any], error: str | None
) -> dict[str, Any]:
    """What a sweep that returned gives back (its error says why when it stopped itself)."""
    return {"results": results, "best": best, "summary": summary, "error": error}


def partial(results: list) -> dict[str, Any]:
    """What a sweep that fails carries to its module's failure: the lines it finished."""
    return {"results": results}


def failed(error: str, results: list | None = None) -> dict[str, Any]:
    """A sweep module that failed: its message, and the lines it returned when it had any."""
    outcome: dict[str, Any] = {"error": error}
    if results:
        outcome["results"] = results
    return outcome


def died(error: str, results: list, leftover_stopped: Any) -> dict[str, Any]:
    """A sweep process that ended without a result: what it finished, its server stopped."""
    return {"error": error, "results": results, "leftover_stopped": leftover_stopped}


def timed_out(error: str, results: list, leftover_stopped: Any) -> dict[str, Any]:
    """A sweep the async wrapper killed at its limit."""
    return {**died(error, results, leftover_stopped), "timed_out": True}


def of_module_result(job: dict[str, Any]) -> dict[str, Any]:
    """The outcome in the sweep module's own result (its async job file)."""
    return {name: job.get(name) for name in always(FINISHED)}


# --------------------------------------------------------------------------- readers


def lines(outcome: Any) -> list:
    """The outcome's results lines as returned (a reader checks each one)."""
    found = outcome.get("results") if isinstance(outcome, Mapping) else None
    return list(found) if isinstance(found, (list, tuple)) else []


def best(outcome: Any) -> dict[str, Any] | None:
    found = outcome.get("best") if isinstance(outcome, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else None


def summary_of(outcome: Any) -> dict[str, Any]:
    """The outcome's summary ({} when it has none: a sweep that did not finish)."""
    found = outcome.get("summary") if isinstance(outcome, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else {}


def error(outcome: Any) -> str | None:
    """Why the sweep did not finish, or None."""
    found = outcome.get("error") if isinstance(outcome, Mapping) else None
    return str(found) if found else None


def problems() -> list[str]:
    """What is inconsistent in the table itself (a test asserts there is nothing)."""
    found = []
    if len(set(NAMES)) != len(NAMES) or len(set(SUMMARY_NAMES)) != len(SUMMARY_NAMES):
        found.append("a key is declared twice")
    for f in FIELDS:
        unknown = set(f.always) - set(ENDS)
        if unknown:
            found.append("%s: unknown ends %s" % (f.name, sorted(unknown)))
    if not set(UNLAUNCHED) <= set(SUMMARY_NAMES):
        found.append("UNLAUNCHED is not SUMMARY keys")
    return found
