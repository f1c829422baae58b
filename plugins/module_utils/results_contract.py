# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The results contract: what a line of a node's results file means, owned once.

The node writes results lines (plugins/module_utils/sweep.py) and the controller reads them
(bwtune import, the results database, reports). Both import every rule from here: the
schema version, the statuses and which of them are failures, the line builder and
validator, the JSONL reader with its one torn-last-line rule, the default objective and
best selection, the 95% interval, the strategy names and the run-id rule. Standard library
only: it runs under the node's system Python (>= 3.10). See docs/architecture.md
("Results file") for a line's shape.
"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.bwtune.sglang.plugins.module_utils import student_t

# --------------------------------------------------------------------------- versions

# A results line's `schema`. Adding an optional field keeps it; changing a field's meaning
# or removing one bumps it (and the controller's validator names the version it reads).
SCHEMA_VERSION = 1
# The `schema` key of every `--json` output of the CLI (runs, report, export, sweep, ...).
OUTPUT_SCHEMA_VERSION = 1


def versioned(output: Mapping[str, Any]) -> Dict[str, Any]:
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


def outcome_counts(lines: Iterable[Mapping[str, Any]]) -> Dict[str, Any]:
    """{"ok", "screened_out", "failed": {class: n}, "not_launched": {class: n}} of some lines.

    A screened-out config is ok (it ran fine; the screen found it not worth the full
    workloads) and is counted in both "ok" and "screened_out".
    """
    ok = screened = 0
    failed: Dict[str, int] = {}
    not_launched: Dict[str, int] = {}
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


def run_id_problem(run_id: Any) -> Optional[str]:
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


# --------------------------------------------------------------------------- building a line

# Every field of a results line, in order, with its default. Add a field here (and to the
# validator and docs/architecture.md) before a node writes it.
LINE_DEFAULTS: Dict[str, Any] = {
    "schema": SCHEMA_VERSION,
    "run_id": None,
    "host": None,
    "config_id": None,
    "point": {},
    "flags": {},
    "argv": [],
    "launch_command": [],
    "status": None,
    "simulated": False,
    "stack_fingerprint": None,
    # The stack's components (stack_info.components): torch, CUDA, SGLang version and commit,
    # sgl-kernel and its build, FlashInfer, driver. Optional: older lines lack it.
    "stack": None,
    "gpu": None,
    "sglang_version": None,
    "started_at": None,
    "finished_at": None,
    "timings": {},
    "release": None,
    # Where the launch's start-up time went (COLD_START_SECONDS); optional: older lines lack it.
    "cold_start": None,
    "metrics": {},
    "accept_length": None,
    "screened_out": False,
    "duplicate_of": None,
    "failure": None,
    "reasons": [],
}
_LINE_REQUIRED = ("run_id", "host", "config_id", "status")

# A launched line's `cold_start`: seconds from the server process's start (monotonic clock)
# to each phase it reached, null for the phases it did not reach.
#   process_to_listen_s  its HTTP port first answered (any status)
#   to_health_s          /health answered 200 (/health_generate, for a server without /health)
#   to_ready_s           /health_generate and an authenticated route answered: the sweep's
#                        whole launch-to-ready wait, after which it sends the gate
#   to_first_token_s     the first generated answer arrived (the correctness gate's first
#                        answer: late by at most its few tokens' decode)
#   failed_after_s       a launch that never became ready: when the sweep gave up on it
# `reached` names the last phase reached: how far a failed launch got.
COLD_START_PHASES = ("started", "listening", "health", "ready", "first_token")
COLD_START_SECONDS = (
    "process_to_listen_s",
    "to_health_s",
    "to_ready_s",
    "to_first_token_s",
    "failed_after_s",
)


def make_line(**fields: Any) -> Dict[str, Any]:
    """A results line with every field of the contract; unknown fields are refused."""
    unknown = sorted(set(fields) - set(LINE_DEFAULTS))
    if unknown:
        raise TypeError("not results line fields: %s" % ", ".join(unknown))
    missing = [key for key in _LINE_REQUIRED if fields.get(key) is None]
    if missing:
        raise TypeError("a results line needs %s" % ", ".join(missing))
    line = {key: copy.deepcopy(default) for key, default in LINE_DEFAULTS.items()}
    line.update(fields)
    line["schema"] = SCHEMA_VERSION
    return line


def make_failure(failure_class: str, message: str, log_tail: Sequence[str] = ()) -> Dict[str, Any]:
    if failure_class not in FAILURE_CLASSES:
        raise ValueError(
            "unknown failure class %r (expected one of %s)" % (failure_class, ", ".join(FAILURE_CLASSES))
        )
    return {"class": failure_class, "message": str(message), "log_tail": [str(line) for line in log_tail]}


# --------------------------------------------------------------------------- checking a line


class ResultsFormatError(ValueError):
    """A results line or file breaks the contract; the message names the file, line and value."""


_REQUIRED_KEYS = ("schema", "run_id", "host", "config_id", "flags", "status", "metrics")
# Fields checked for their type when present (null allowed: lines of older nodes lack some).
_TYPED_FIELDS: Tuple[Tuple[str, type, str], ...] = (
    ("flags", dict, "an object"),
    ("point", dict, "an object"),
    ("timings", dict, "an object"),
    ("argv", list, "a list"),
    ("launch_command", list, "a list"),
    ("reasons", list, "a list"),
    ("release", dict, "an object or null"),
    ("stack", dict, "an object or null"),
    ("cold_start", dict, "an object or null"),
    ("duplicate_of", str, "a config id or null"),
)


def validate_line(record: Any, where: str = "<result>") -> None:
    """Raise ResultsFormatError naming the first contract violation in one results line.

    Fields added after schema 1 (launch_command, release, screened_out, duplicate_of, stack,
    cold_start) are optional so lines of older nodes still load; when present their type is
    checked.
    """
    if not isinstance(record, dict):
        raise ResultsFormatError(
            "%s: a results line must be a JSON object, got %s" % (where, type(record).__name__)
        )
    for key in _REQUIRED_KEYS:
        if key not in record:
            raise ResultsFormatError("%s: missing key %r" % (where, key))
    if record["schema"] != SCHEMA_VERSION:
        raise ResultsFormatError(
            "%s: schema %r is not supported (expected %d)" % (where, record["schema"], SCHEMA_VERSION)
        )
    for key in ("host", "config_id"):
        if not isinstance(record[key], str) or not record[key]:
            raise ResultsFormatError("%s: %s must be a non-empty string, got %r" % (where, key, record[key]))
    problem = run_id_problem(record["run_id"])
    if problem:
        raise ResultsFormatError("%s: run_id %r: %s" % (where, record["run_id"], problem))
    status = record["status"]
    if status not in STATUSES:
        raise ResultsFormatError("%s: status %r is not one of %s" % (where, status, ", ".join(STATUSES)))
    for key, kind, name in _TYPED_FIELDS:
        if record.get(key) is not None and not isinstance(record[key], kind):
            raise ResultsFormatError("%s: %s must be %s, got %r" % (where, key, name, record[key]))
    for key in ("argv", "launch_command"):
        if any(not isinstance(arg, str) for arg in record.get(key) or []):
            raise ResultsFormatError("%s: %s must hold strings only" % (where, key))
    if not isinstance(record.get("screened_out", False), bool):
        raise ResultsFormatError("%s: screened_out must be true or false" % where)
    if record.get("cold_start") is not None:
        _validate_cold_start(record["cold_start"], "%s: cold_start" % where)
    metrics = record["metrics"]
    if not isinstance(metrics, dict):
        raise ResultsFormatError("%s: metrics must be an object keyed by workload" % where)
    for workload, block in metrics.items():
        _validate_metric_block(block, "%s: metrics[%r]" % (where, workload))
    failure = record.get("failure")
    if status != OK:
        if not isinstance(failure, dict) or "class" not in failure:
            raise ResultsFormatError("%s: status %r needs a failure object with a class" % (where, status))
        if failure["class"] != status:
            raise ResultsFormatError(
                "%s: failure class %r does not match status %r" % (where, failure["class"], status)
            )
    elif failure is not None:
        raise ResultsFormatError("%s: status 'ok' must have failure null, got %r" % (where, failure))


def _validate_cold_start(block: Mapping[str, Any], where: str) -> None:
    for key in COLD_START_SECONDS:
        value = block.get(key)
        if value is not None and not (is_number_or_null(value) and value >= 0):
            raise ResultsFormatError(
                "%s.%s must be seconds (a number >= 0) or null, got %r" % (where, key, value)
            )
    if block.get("reached") not in COLD_START_PHASES:
        raise ResultsFormatError(
            "%s.reached must be one of %s, got %r"
            % (where, ", ".join(COLD_START_PHASES), block.get("reached"))
        )


def _validate_metric_block(block: Any, where: str) -> None:
    if not isinstance(block, dict):
        raise ResultsFormatError("%s must be an object" % where)
    values = block.get("values", {})
    if not isinstance(values, dict):
        raise ResultsFormatError("%s.values must be an object" % where)
    for metric, value in values.items():
        if not is_number_or_null(value):
            raise ResultsFormatError("%s.values[%r] must be a number, got %r" % (where, metric, value))
    for index, repetition in enumerate(block.get("repetitions") or []):
        if not isinstance(repetition, dict):
            raise ResultsFormatError("%s.repetitions[%d] must be an object" % (where, index))
        for metric, value in repetition.items():
            if not is_number_or_null(value):
                raise ResultsFormatError(
                    "%s.repetitions[%d][%r] must be a number, got %r" % (where, index, metric, value)
                )
    for metric, pair in (block.get("ci95") or {}).items():
        if pair is not None and not (
            isinstance(pair, list) and len(pair) == 2 and all(is_number_or_null(v) for v in pair)
        ):
            raise ResultsFormatError("%s.ci95[%r] must be [low, high], got %r" % (where, metric, pair))


def is_number_or_null(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# --------------------------------------------------------------------------- reading a file


def complete_json_object(raw: bytes) -> Optional[Dict[str, Any]]:
    """The JSON object in `raw`, or None when it is not one (e.g. a line cut short)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def parse_jsonl(
    data: bytes, source: str = "<results>", *, validate: bool = False, run_id: Optional[str] = None
) -> Tuple[List[Dict[str, Any]], List[str]]:
    """(records, warnings) of a results file's bytes, under the one torn-line rule.

    A kill during an append can leave a torn LAST line: no newline and not a whole JSON
    object. It is skipped with a warning (that config was never finished). A complete
    object missing only its newline is kept. Anything else that is not a JSON object, in
    the middle or a complete last line, is damage: ResultsFormatError names the line.
    Blank lines are skipped. `validate` also checks each record (validate_line); `run_id`
    replaces each record's run id first (`bwtune import --run-id`).
    """
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    records: List[Dict[str, Any]] = []
    warnings: List[str] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = "%s:%d" % (source, number)
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise ResultsFormatError("%s: not a JSON line (%s)" % (where, exc)) from None
        records.append(_checked(obj, where, validate, run_id))
    if tail.strip():
        where = "%s:%d" % (source, len(lines) + 1)
        obj = complete_json_object(tail)
        if obj is None:
            warnings.append(
                "%s: skipped a torn last line (%d bytes, no newline: a write cut short)" % (where, len(tail))
            )
        else:
            records.append(_checked(obj, where, validate, run_id))
    return records, warnings


def _checked(obj: Any, where: str, validate: bool, run_id: Optional[str]) -> Dict[str, Any]:
    if not isinstance(obj, dict):
        raise ResultsFormatError(
            "%s: a results line must be a JSON object, got %s" % (where, type(obj).__name__)
        )
    if run_id is not None:
        obj["run_id"] = run_id
    if validate:
        validate_line(obj, where)
    return obj


def read_jsonl(
    path: str, *, validate: bool = False, run_id: Optional[str] = None
) -> Tuple[List[Dict[str, Any]], List[str]]:
    """parse_jsonl of a file; OSError (a missing file included) is the caller's to handle."""
    with open(path, "rb") as handle:
        data = handle.read()
    return parse_jsonl(data, str(path), validate=validate, run_id=run_id)


# --------------------------------------------------------------------------- objective

# Without an `objective` in the matrix, configs are ranked by output_throughput (max) on the
# first workload: sglang.bench_serving's headline figure, meaningful at every concurrency
# (a per-request decode rate only says something about a lightly loaded server), and the
# one results databases already recorded for runs without an objective.
DEFAULT_METRIC = "output_throughput"
GOALS = ("max", "min")
DEFAULT_GOAL = "max"


def normalize_objective(objective: Any, workloads: Sequence[Mapping[str, Any]] = ()) -> Dict[str, Any]:
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


def objective_of(matrix: Mapping[str, Any]) -> Dict[str, Any]:
    """The matrix's objective (or the default) with its workload resolved."""
    workloads = [w for w in matrix.get("workloads") or [] if isinstance(w, Mapping)]
    return normalize_objective(matrix.get("objective"), workloads)


def better(a: float, b: float, goal: str) -> bool:
    return a > b if goal == "max" else a < b


def metric_value(
    line: Mapping[str, Any], objective: Mapping[str, Any], workload: Optional[str] = None
) -> Optional[float]:
    """The objective's metric in a line, whatever its status (None when not measured)."""
    block = (line.get("metrics") or {}).get(workload or objective.get("workload")) or {}
    value = (block.get("values") or {}).get(objective.get("metric"))
    return float(value) if value is not None and is_number_or_null(value) else None


def metric_ci95(
    line: Mapping[str, Any], objective: Mapping[str, Any], workload: Optional[str] = None
) -> Optional[Tuple[float, float]]:
    block = (line.get("metrics") or {}).get(workload or objective.get("workload")) or {}
    pair = (block.get("ci95") or {}).get(objective.get("metric"))
    if (
        isinstance(pair, (list, tuple))
        and len(pair) == 2
        and all(is_number_or_null(v) and v is not None for v in pair)
    ):
        return float(pair[0]), float(pair[1])
    return None


def metric_repetitions(
    line: Mapping[str, Any], objective: Mapping[str, Any], workload: Optional[str] = None
) -> List[float]:
    """The objective's metric in each repetition of a line: one launch's samples."""
    block = (line.get("metrics") or {}).get(workload or objective.get("workload")) or {}
    metric = objective.get("metric")
    return [
        float(rep[metric])
        for rep in block.get("repetitions") or []
        if isinstance(rep, Mapping) and rep.get(metric) is not None and is_number_or_null(rep[metric])
    ]


def eligible_value(
    line: Mapping[str, Any], objective: Mapping[str, Any], workload: Optional[str] = None
) -> Optional[float]:
    """The value a line competes with: only status ok can win (wrong-output never does)."""
    return metric_value(line, objective, workload) if line.get("status") == OK else None


def launch_key(line: Mapping[str, Any]) -> Tuple[str, str, str]:
    """What makes lines launches of one config: the same host, config id and stack."""
    return (
        str(line.get("host")),
        str(line.get("config_id") or line.get("id")),
        str(line.get("stack_fingerprint")),
    )


def pooled_launches(
    lines: Iterable[Mapping[str, Any]], objective: Mapping[str, Any]
) -> Dict[Tuple[str, str, str], Tuple[float, List[Tuple[float, Mapping[str, Any]]]]]:
    """Each config's eligible launches by `launch_key`, in the order given, as (the mean of
    their values, [(value, line), ...]): the value a config competes with in `pick_best`,
    and what a report shows for it."""
    groups: Dict[Tuple[str, str, str], List[Tuple[float, Mapping[str, Any]]]] = {}
    for line in lines:
        value = eligible_value(line, objective)
        if value is not None:
            groups.setdefault(launch_key(line), []).append((value, line))
    return {
        key: (math.fsum(value for value, _line in measured) / len(measured), measured)
        for key, measured in groups.items()
    }


def pick_best(
    lines: Iterable[Mapping[str, Any]], objective: Mapping[str, Any]
) -> Optional[Mapping[str, Any]]:
    """The best line by the objective among status ok; equal values go to the first by
    (host, config id), so the winner does not depend on the order lines arrived in.

    A config measured more than once (the same host, config id and stack: a re-measure of
    the top candidates, or a config measured again) competes with the mean of its values
    (`pooled_launches`), and stands for itself by its last line (latest finished_at). A
    config whose last launch failed (a re-measure that crashed) does not win: it is not safe
    to serve, and its last line is a failure."""
    lines = list(lines)
    last_status: Dict[Tuple[str, str, str], Tuple[str, int, Any]] = {}
    for n, line in enumerate(lines):
        order = (str(line.get("finished_at") or ""), n, line.get("status"))
        key = launch_key(line)
        if key not in last_status or order[:2] > last_status[key][:2]:
            last_status[key] = order
    groups = pooled_launches(lines, objective)
    candidates = []
    for key in sorted(groups):
        if last_status[key][2] != OK:
            continue
        pooled, measured = groups[key]
        last = max(measured, key=lambda m: str(m[1].get("finished_at") or ""))[1]
        candidates.append((pooled, last))
    if not candidates:
        return None
    sign = 1.0 if objective.get("goal", DEFAULT_GOAL) == "max" else -1.0
    return max(candidates, key=lambda c: sign * c[0])[1]


# --------------------------------------------------------------------------- statistics


def mean_ci95(values: Sequence[float]) -> Tuple[float, Optional[Tuple[float, float]], Optional[float]]:
    """(mean, two-sided 95% Student-t interval of the mean, coefficient of variation).

    The interval and the CV are None with fewer than two values. This is what a results
    line's `ci95` and `cv` mean.
    """
    n = len(values)
    if n == 0:
        raise ValueError("mean_ci95 needs at least one value")
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None, None
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = student_t.t_ppf(0.975, n - 1) * sd / math.sqrt(n)
    cv = sd / abs(mean) if mean else None
    return mean, (mean - half, mean + half), cv


def intervals_overlap(a: Optional[Tuple[float, float]], b: Optional[Tuple[float, float]]) -> bool:
    """True when two 95% intervals share a point: the values are within each other's noise."""
    if a is None or b is None:
        return False
    return a[0] <= b[1] and b[0] <= a[1]
