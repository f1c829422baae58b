"""A results line and its rows, both ways, derived from the field table.

results_fields.FIELDS says where each field of a line is kept (a column of `results` or
`configs` and how, the `failures` row, the `workload_values` rows, or only the whole line
stored with each result); the INSERTs, the rows they take and the line rebuilt from a row
all come from it here. Nothing else in the store names a line's columns one by one.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_fields

Key = tuple[str, str, str]  # (run id, host, config id): one result

# json.dumps(value, sort_keys=True, separators=(",", ":")) without a new encoder per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_COMPACT = json.JSONEncoder(separators=(",", ":"))  # json.dumps(..., separators=(",", ":"))


def dumps(value: Any) -> str:
    """Canonical JSON: keys sorted, no spaces (what a stored line and its hash are)."""
    return _CANONICAL.encode(value)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# ----------------------------------------------------------------- a results file's line, fast
#
# `bwtune import` of a big file spends most of its time parsing each line and encoding it
# again as canonical JSON (the stored line, and its hash: a re-import compares it). orjson does
# both several times faster; it is used only where its value and bytes are json's exactly:
#   - parsing: orjson refuses what it cannot parse exactly as json.loads does (NaN, Infinity,
#     1e400, lone surrogates, a byte order mark), and json.loads then parses (or refuses) the
#     line as ever; it reads an integer beyond 64 bits as a float, so a line with a run of 19
#     digits (every such integer has one) not after a "." (a float's fraction, which orjson
#     reads exactly) is json.loads's from the start;
#   - encoding: of a value orjson parsed (so no NaN, no infinity, no integer beyond 64 bits),
#     orjson's sorted compact bytes are json.dumps(sort_keys=True, separators=(",", ":"))'s
#     unless they hold a non-ASCII character (json.dumps writes \uXXXX), DEL (\u007f), a float
#     below 1e-4 in fixed notation ("0.00001": json writes "1e-05") or a one-digit negative
#     exponent ("1e-7": json writes "1e-07"); those lines are json.dumps's.
# tests/unit/store/test_fast_canonical.py holds both to json's over such cases.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")  # a digit run, found by `in`
_ORJSON_EXPONENT = re.compile(rb"[0-9]e-[0-9](?![0-9])")  # orjson's "1e-7", json's "1e-07"


def _orjson_text_is_json(out: bytes) -> bool:
    """Whether orjson's bytes of a value it parsed are json.dumps's (the cases above)."""
    if not out.isascii() or b"\x7f" in out or b"0.0000" in out:
        return False
    return b"0e-0" not in out.translate(_DIGITS_AS_ZERO) or _ORJSON_EXPONENT.search(out) is None


_NINETEEN_DIGITS = b"0" * 19


def _may_hold_long_integer(raw: bytes) -> bool:
    """Whether `raw` has a run of 19 or more digits that is not a fraction's (after a ".")."""
    digits = raw.translate(_DIGITS_AS_ZERO)
    start = digits.find(_NINETEEN_DIGITS)
    while start != -1:
        if start == 0 or digits[start - 1] != ord("."):
            return True
        end = start + len(_NINETEEN_DIGITS)
        while end < len(digits) and digits[end] == ord("0"):
            end += 1
        start = digits.find(_NINETEEN_DIGITS, end)
    return False


def load_line(raw: bytes) -> tuple[Any, bool]:
    """json.loads(raw)'s value (or its ValueError), and whether orjson parsed it: then
    canonical_text may encode it with orjson."""
    if not _may_hold_long_integer(raw):
        try:
            return orjson.loads(raw), True
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw), False


def canonical_text(value: Any, parsed_by_orjson: bool) -> str:
    """dumps(value), exactly; by orjson for a value load_line parsed with orjson (see above)."""
    return _exact(value, orjson.OPT_SORT_KEYS, dumps) if parsed_by_orjson else dumps(value)


def finite_line(text: str) -> bool:
    """Whether a line whose canonical text is `text` holds no NaN and no infinity (json writes
    them NaN, Infinity): then the rows of its parts may be encoded by orjson (see above;
    `finite=True` of result_row, config_row, failure_row and values_rows)."""
    return "NaN" not in text and "Infinity" not in text


def _exact(value: Any, option: int, slow: Callable[[Any], str]) -> str:
    """slow(value) (json's canonical or compact text), by orjson where its bytes are the same:
    for a value without NaN or infinity, which orjson would write null."""
    try:
        out = orjson.dumps(value, option=option)
    except TypeError:  # e.g. an integer beyond 64 bits
        return slow(value)
    return out.decode("ascii") if _orjson_text_is_json(out) else slow(value)


def _finite_dumps(value: Any) -> str:
    return _exact(value, orjson.OPT_SORT_KEYS, dumps)


def _finite_compact(value: Any) -> str:
    return _exact(value, 0, _COMPACT.encode)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- columns

RESULT_FIELDS = results_fields.columns("results")
CONFIG_FIELDS = results_fields.columns("configs")
_CONFIG_ID = results_fields.BY_NAME["config_id"]
# A results row's columns: the line's fields', then its hash, its attempt and the whole line.
RESULT_COLUMNS = (*(str(f.column) for f in RESULT_FIELDS), "line_sha256", "attempt", "line_json")
CONFIG_COLUMNS = ("config_id", *(str(f.column) for f in CONFIG_FIELDS))


def _insert(verb: str, table: str, columns: tuple[str, ...]) -> str:
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"


INSERT_RESULT = _insert("INSERT", "results", RESULT_COLUMNS)
# A config id is a hash of the flags: the first line seen with it names its flags, argv, point.
INSERT_CONFIG = _insert("INSERT OR IGNORE", "configs", CONFIG_COLUMNS)
INSERT_FAILURE = _insert(
    "INSERT", "failures", ("run_id", "host", "config_id", "class", "message", "log_tail_json")
)
INSERT_VALUES = _insert(
    "INSERT", "workload_values", ("run_id", "host", "config_id", "workload", "values_json")
)
# The configs columns of a result, for a SELECT joining `configs c`.
CONFIG_SELECT = ", ".join(f"c.{f.column}" for f in CONFIG_FIELDS)


def encode(field: results_fields.Field, record: Mapping[str, Any], dump: Callable[[Any], str] = dumps) -> Any:
    """The column value of one field of a line (its codec: results_fields.CODECS); `dump`
    writes a JSON field's canonical text (dumps, or _finite_dumps for a finite line)."""
    value = record.get(field.name)
    if field.codec == "bool":
        return int(bool(value))
    if field.codec == "nonempty":
        return value or None
    if field.codec == "json":
        if field.required:
            return dump(value)
        if value is None:
            value = field.default
        return None if value is None else dump(value)
    return value


def decode(field: results_fields.Field, stored: Any) -> Any:
    """A field's value from its column (encode's inverse; an optional field's NULL is its default)."""
    if field.codec == "bool":
        return bool(stored)
    if field.codec == "json":
        value = loads(stored)
        return field.new_default() if value is None and not field.required else value
    return stored


# A row's values are the same text whether `finite` (finite_line: encoded by orjson where it is
# exact) or not: tests/unit/store/test_fast_canonical.py.


def result_row(
    record: Mapping[str, Any], digest: str, attempt: int, line_json: str, *, finite: bool = False
) -> tuple[Any, ...]:
    """INSERT_RESULT's values for a checked line (its canonical text and that text's hash)."""
    dump = _finite_dumps if finite else dumps
    return (*(encode(f, record, dump) for f in RESULT_FIELDS), digest, attempt, line_json)


def config_row(record: Mapping[str, Any], *, finite: bool = False) -> tuple[Any, ...]:
    dump = _finite_dumps if finite else dumps
    return (record[_CONFIG_ID.name], *(encode(f, record, dump) for f in CONFIG_FIELDS))


def failure_row(key: Key, record: Mapping[str, Any], *, finite: bool = False) -> tuple[Any, ...] | None:
    """INSERT_FAILURE's values for a failed line, None for a line without a failure."""
    failure = record.get("failure")
    if not failure:
        return None
    dump = _finite_dumps if finite else dumps
    return (*key, failure["class"], str(failure.get("message") or ""),
            dump([str(line) for line in failure.get("log_tail") or []]))  # fmt: skip


def values_rows(key: Key, record: Mapping[str, Any], *, finite: bool = False) -> list[tuple[str, ...]]:
    """INSERT_VALUES' values: per workload, the values a query ranks by (the whole block is
    in the result's stored line)."""
    return [
        (*key, workload, values_json(block, finite=finite)) for workload, block in record["metrics"].items()
    ]


def values_json(block: Mapping[str, Any], *, finite: bool = False) -> str:
    values = block.get("values") or {}
    compact = _finite_compact if finite else _COMPACT.encode
    return compact({m: v for m, v in values.items() if v is not None})


# --------------------------------------------------------------------------- the line back


# How line_from_row reads each field kept apart from the whole line, in field order: from a
# column (and its codec), or as the constant, the metrics or the failure it is given.
_READ = tuple(
    (f, str(f.column) if f.column else f.store)
    for f in results_fields.FIELDS
    if f.store in ("results", "configs", "constant", "workload_values", "failures")
)


def line_from_row(
    row: sqlite3.Row, metrics: dict[str, Any], failure: dict[str, Any] | None
) -> dict[str, Any]:
    """A line's fields as its row keeps them, in field order: every field stored apart from
    the whole line (the columns of `results` and `configs`, the metrics and failure given).
    Fields kept only in the whole line (stack, cold_start, objective) are not here."""
    line: dict[str, Any] = {}
    for field, where in _READ:
        if where == "workload_values":
            line[field.name] = metrics
        elif where == "failures":
            line[field.name] = failure
        elif where == "constant":
            line[field.name] = field.new_default()
        else:
            line[field.name] = decode(field, row[where])
    return line


def failure_from_row(row: sqlite3.Row) -> dict[str, Any] | None:
    """The failure of a row joined with `failures` as failure_class, failure_message, log_tail_json."""
    if row["failure_class"] is None:
        return None
    return {
        "class": row["failure_class"],
        "message": row["failure_message"],
        "log_tail": json.loads(row["log_tail_json"]),
    }
