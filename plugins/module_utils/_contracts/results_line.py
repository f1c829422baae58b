# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A results line built (every field, its defaults) and checked field by field, from results_fields."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_fields
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_vocab import (
    FAILURE_CLASSES,
    OK,
    SCHEMA_VERSION,
    STATUSES,
    normalize_objective,
    run_id_problem,
)

# --------------------------------------------------------------------------- building a line

# Every field of a results line, in order, with its default (derived from
# results_fields.FIELDS: add a field there before a node writes it).
LINE_DEFAULTS: dict[str, Any] = {f.name: f.default for f in results_fields.FIELDS}
# What make_line needs a value for: the required fields without a default.
_LINE_REQUIRED = results_fields.REQUIRED_VALUES

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


def make_line(**fields: Any) -> dict[str, Any]:
    """A results line with every field of the contract; unknown fields are refused."""
    unknown = sorted(set(fields) - set(LINE_DEFAULTS))
    if unknown:
        raise TypeError("not results line fields: %s" % ", ".join(unknown))
    missing = [key for key in _LINE_REQUIRED if fields.get(key) is None]
    if missing:
        raise TypeError("a results line needs %s" % ", ".join(missing))
    line = {f.name: f.new_default() for f in results_fields.FIELDS}
    line.update(fields)
    line["schema"] = SCHEMA_VERSION
    return line


# A line's `hardware`: the parts of its hardware group the node knows (results_fields).
HARDWARE_PARTS = ("gpu_model", "gpu_count", "sm", "interconnect")
# bwtune_gpu.sm when the GPUs are of several generations.
_MIXED_SM = "mixed"


def hardware_of(gpu_facts: Any, sm: Any = None) -> dict[str, Any]:
    """A line's `hardware` from the node's GPU facts (gpu_info.build_facts' keys: count,
    gpus[].name, sm, interconnect) and the line's SM tag `sm` (the plan's `gpu`, which the
    planner checked against the facts): each part null where the facts do not say it (no
    facts, no GPUs found, GPUs of several kinds)."""
    facts = gpu_facts if isinstance(gpu_facts, Mapping) else {}
    known = bool(facts.get("available"))
    names = {g.get("name") for g in facts.get("gpus") or [] if isinstance(g, Mapping)}
    model = names.pop() if known and len(names) == 1 else None
    count = facts.get("count") if known else None
    interconnect = facts.get("interconnect") if known else None
    if not (isinstance(sm, str) and sm):
        sm = facts.get("sm") if known and facts.get("sm") != _MIXED_SM else None
    return {
        "gpu_model": model if isinstance(model, str) and model else None,
        "gpu_count": count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None,
        "sm": sm if isinstance(sm, str) and sm else None,
        "interconnect": interconnect if isinstance(interconnect, str) and interconnect else None,
    }


def make_failure(failure_class: str, message: str, log_tail: Sequence[str] = ()) -> dict[str, Any]:
    if failure_class not in FAILURE_CLASSES:
        raise ValueError(
            "unknown failure class %r (expected one of %s)" % (failure_class, ", ".join(FAILURE_CLASSES))
        )
    return {"class": failure_class, "message": str(message), "log_tail": [str(line) for line in log_tail]}


# --------------------------------------------------------------------------- checking a line


class ResultsFormatError(ValueError):
    """A results line or file breaks the contract; the message names the file, line and value."""


# The keys a line must carry (results_fields.FIELDS' required ones, in field order).
_REQUIRED_KEYS = results_fields.REQUIRED

# One check per kind of field (results_fields.KINDS), each given the field; a field of an
# unchecked kind is documented, never refused. Fields checked for a type allow null unless
# required: lines of older nodes lack some.
_Check = Callable[[Mapping[str, Any], str, str], None]


def _check_schema(field: results_fields.Field) -> _Check:
    def check(record: Mapping[str, Any], where: str, name: str) -> None:
        if record[name] != SCHEMA_VERSION:
            raise ResultsFormatError(
                "%s: schema %r is not supported (expected %d)" % (where, record[name], SCHEMA_VERSION)
            )

    return check


def _check_run_id(field: results_fields.Field) -> _Check:
    def check(record: Mapping[str, Any], where: str, name: str) -> None:
        problem = run_id_problem(record[name])
        if problem:
            raise ResultsFormatError("%s: %s %r: %s" % (where, name, record[name], problem))

    return check


def _check_name(field: results_fields.Field) -> _Check:
    def check(record: Mapping[str, Any], where: str, name: str) -> None:
        value = record[name]
        if not isinstance(value, str) or not value:
            raise ResultsFormatError("%s: %s must be a non-empty string, got %r" % (where, name, value))

    return check


def _check_status(field: results_fields.Field) -> _Check:
    def check(record: Mapping[str, Any], where: str, name: str) -> None:
        if record[name] not in STATUSES:
            raise ResultsFormatError(
                "%s: %s %r is not one of %s" % (where, name, record[name], ", ".join(STATUSES))
            )

    return check


def _check_type(kind: type, noun: str, then: _Check | None = None) -> _Check:
    def check(record: Mapping[str, Any], where: str, name: str) -> None:
        value = record.get(name)
        if value is not None and not isinstance(value, kind):
            raise ResultsFormatError("%s: %s must be %s, got %r" % (where, name, noun, value))
        if then is not None and value is not None:
            then(record, where, name)

    return check


def _check_object(field: results_fields.Field) -> _Check:
    noun = "an object or null" if field.default is None else "an object"
    return _check_type(dict, noun, _OBJECT_PARTS.get(field.name))


def _check_list(field: results_fields.Field) -> _Check:
    return _check_type(list, "a list")


def _hold_strings(record: Mapping[str, Any], where: str, name: str) -> None:
    if any(not isinstance(arg, str) for arg in record[name]):
        raise ResultsFormatError("%s: %s must hold strings only" % (where, name))


def _check_strings(field: results_fields.Field) -> _Check:
    return _check_type(list, "a list", _hold_strings)


def _check_config_id(field: results_fields.Field) -> _Check:
    return _check_type(str, "a config id or null")


def _check_bool(field: results_fields.Field) -> _Check:
    def check(record: Mapping[str, Any], where: str, name: str) -> None:
        if not isinstance(record.get(name, field.default), bool):
            raise ResultsFormatError("%s: %s must be true or false" % (where, name))

    return check


def _cold_start_block(record: Mapping[str, Any], where: str, name: str) -> None:
    _validate_cold_start(record[name], "%s: %s" % (where, name))


def _check_cold_start(field: results_fields.Field) -> _Check:
    return _check_type(dict, "an object or null", _cold_start_block)


def _check_objective(field: results_fields.Field) -> _Check:
    def check(record: Mapping[str, Any], where: str, name: str) -> None:
        if record.get(name) is not None:
            try:
                normalize_objective(record[name])
            except ValueError as exc:
                raise ResultsFormatError("%s: %s: %s" % (where, name, exc)) from None

    return check


def _check_metrics(field: results_fields.Field) -> _Check:
    def check(record: Mapping[str, Any], where: str, name: str) -> None:
        metrics = record[name]
        if not isinstance(metrics, dict):
            raise ResultsFormatError("%s: %s must be an object keyed by workload" % (where, name))
        for workload, block in metrics.items():
            _validate_metric_block(block, "%s: %s[%r]" % (where, name, workload))

    return check


def _check_failure(field: results_fields.Field) -> _Check:
    """The failure of every status but ok, of its class; none for ok (status is checked first)."""

    def check(record: Mapping[str, Any], where: str, name: str) -> None:
        failure, status = record.get(name), record["status"]
        if status != OK:
            if not isinstance(failure, dict) or "class" not in failure:
                raise ResultsFormatError(
                    "%s: status %r needs a failure object with a class" % (where, status)
                )
            if failure["class"] != status:
                raise ResultsFormatError(
                    "%s: failure class %r does not match status %r" % (where, failure["class"], status)
                )
        elif failure is not None:
            raise ResultsFormatError("%s: status 'ok' must have failure null, got %r" % (where, failure))

    return check


def _hardware_parts(record: Mapping[str, Any], where: str, name: str) -> None:
    block = record[name]
    unknown = sorted(set(block) - set(HARDWARE_PARTS))
    if unknown:
        raise ResultsFormatError("%s: %s has unknown parts %s" % (where, name, ", ".join(unknown)))
    for part in ("gpu_model", "sm", "interconnect"):
        value = block.get(part)
        if value is not None and not (isinstance(value, str) and value):
            raise ResultsFormatError(
                "%s: %s.%s must be a non-empty string or null, got %r" % (where, name, part, value)
            )
    count = block.get("gpu_count")
    if count is not None and not (isinstance(count, int) and not isinstance(count, bool) and count > 0):
        raise ResultsFormatError(
            "%s: %s.gpu_count must be a whole number > 0 or null, got %r" % (where, name, count)
        )


# What an object field holds, checked part by part where a field's parts are fixed.
_OBJECT_PARTS: dict[str, _Check] = {"hardware": _hardware_parts}


_CHECKS_BY_KIND: dict[str, Callable[[results_fields.Field], _Check]] = {
    "schema": _check_schema,
    "run id": _check_run_id,
    "name": _check_name,
    "status": _check_status,
    "object": _check_object,
    "list": _check_list,
    "strings": _check_strings,
    "config id": _check_config_id,
    "bool": _check_bool,
    "cold start": _check_cold_start,
    "objective": _check_objective,
    "metrics": _check_metrics,
    "failure": _check_failure,
}
# The validator's checks, field by field in the table's order.
_CHECKS: tuple[tuple[str, _Check], ...] = tuple(
    (f.name, _CHECKS_BY_KIND[f.kind](f))
    for f in results_fields.FIELDS
    if f.kind not in results_fields.UNCHECKED_KINDS
)


def validate_line(record: Any, where: str = "<result>") -> None:
    """Raise ResultsFormatError naming the first contract violation in one results line.

    The checks are results_fields.FIELDS', in field order: first that every required key is
    there, then each field by its kind. Fields added after schema 1 (launch_command,
    release, screened_out, duplicate_of, stack, hardware, cold_start, objective) are optional so
    lines of older nodes still load; when present their type is checked.
    """
    if not isinstance(record, dict):
        raise ResultsFormatError(
            "%s: a results line must be a JSON object, got %s" % (where, type(record).__name__)
        )
    for key in _REQUIRED_KEYS:
        if key not in record:
            raise ResultsFormatError("%s: missing key %r" % (where, key))
    for name, check in _CHECKS:
        check(record, where, name)


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


_NUMBER_TYPES = frozenset((int, float))


def _all_finite_numbers(values: Sequence[Any]) -> bool:
    """True when every value is a finite int or float (no bool, no null): the common case,
    checked in C (a metric block holds hundreds of values). False means only "look at each
    one" (a null, a bool, an overflowing sum...): is_number_or_null decides then."""
    if not set(map(type, values)) <= _NUMBER_TYPES:
        return False
    try:
        return math.isfinite(sum(values, 0.0))
    except OverflowError:  # an int too large for a float
        return False


def _validate_metric_block(block: Any, where: str) -> None:
    if not isinstance(block, dict):
        raise ResultsFormatError("%s must be an object" % where)
    if _metric_block_is_plain(block):
        return
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


def _metric_block_is_plain(block: Mapping[str, Any]) -> bool:
    """Whether a metric block passes _validate_metric_block's checks by the fast route: values,
    every repetition's and every ci95 pair's all finite numbers. False decides nothing (the
    checks then run one value at a time, with their messages)."""
    values = block.get("values", {})
    repetitions = block.get("repetitions") or []
    ci95 = block.get("ci95") or {}
    # Exact types, as the checks below (set(map(type, ...))): anything else takes the slow route.
    # pylint: disable-next=unidiomatic-typecheck
    if type(values) is not dict or type(repetitions) is not list or type(ci95) is not dict:
        return False
    if not set(map(type, repetitions)) <= {dict}:
        return False
    pairs = list(ci95.values())
    if not set(map(type, pairs)) <= {list} or not set(map(len, pairs)) <= {2}:
        return False
    numbers = list(values.values())
    numbers += chain.from_iterable(map(dict.values, repetitions))
    numbers += chain.from_iterable(pairs)
    return _all_finite_numbers(numbers)


def is_number_or_null(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
