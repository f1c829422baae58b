# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A results file read: JSON lines, the torn-last-line rule, each line checked and its run named."""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_line import (
    ResultsFormatError,
    validate_line,
)

# --------------------------------------------------------------------------- reading a file


def complete_json_object(raw: bytes) -> dict[str, Any] | None:
    """The JSON object in `raw`, or None when it is not one (e.g. a line cut short)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def parse_jsonl(
    data: bytes,
    source: str = "<results>",
    *,
    validate: bool = False,
    run_id: str | None = None,
    skip_invalid: bool = False,
    skip_damaged: bool = False,
) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, warnings) of a results file's bytes, under the one torn-line rule.

    A kill during an append can leave a torn LAST line: no newline and not a whole JSON
    object. It is skipped with a warning (that config was never finished). A complete
    object missing only its newline is kept. Anything else that is not a JSON object, in
    the middle or a complete last line, is damage: ResultsFormatError names the line.
    Blank lines are skipped. `validate` also checks each record (validate_line); `run_id`
    replaces each record's run id first (`bwtune import --run-id`).

    `skip_invalid` skips a JSON object that is not a results line (with `validate`) and
    `skip_damaged` any bad line (not JSON, or not a result), each with a warning naming the
    line and why, instead of refusing the file (`bwtune import --skip-bad-lines`, and the
    node's reader for a line that is not a result: that config is measured again).
    """
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    records: list[dict[str, Any]] = []
    warnings: list[str] = []

    def keep(obj: Any, where: str) -> None:
        try:
            records.append(_checked(obj, where, validate, run_id))
        except ResultsFormatError as exc:
            if not (skip_invalid or skip_damaged):
                raise
            warnings.append(skipped_line_warning(str(exc), obj))

    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = "%s:%d" % (source, number)
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            if not skip_damaged:
                raise ResultsFormatError("%s: not a JSON line (%s)" % (where, exc)) from None
            warnings.append("%s: skipped a line that is not JSON (%s)" % (where, exc))
            continue
        keep(obj, where)
    if tail.strip():
        where = "%s:%d" % (source, len(lines) + 1)
        obj = complete_json_object(tail)
        if obj is None:
            warnings.append(
                "%s: skipped a torn last line (%d bytes, no newline: a write cut short)" % (where, len(tail))
            )
        else:
            keep(obj, where)
    return records, warnings


def skipped_line_warning(problem: str, obj: Any) -> str:
    """`r.jsonl:2: skipped a line that is not a result (missing key 'metrics'; config c1)`."""
    where, _sep, why = problem.partition(": ")
    config = obj.get("config_id") if isinstance(obj, dict) else None
    about = "; config %s" % config if isinstance(config, str) and config else ""
    return "%s: skipped a line that is not a result (%s%s)" % (where, why, about)


def _checked(obj: Any, where: str, validate: bool, run_id: str | None) -> dict[str, Any]:
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
    path: str,
    *,
    validate: bool = False,
    run_id: str | None = None,
    skip_invalid: bool = False,
    skip_damaged: bool = False,
) -> tuple[list[dict[str, Any]], list[str]]:
    """parse_jsonl of a file; OSError (a missing file included) is the caller's to handle."""
    with open(path, "rb") as handle:
        data = handle.read()
    return parse_jsonl(
        data,
        str(path),
        validate=validate,
        run_id=run_id,
        skip_invalid=skip_invalid,
        skip_damaged=skip_damaged,
    )
