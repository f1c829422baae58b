"""The bisection's log: one JSON line per measurement, appended and fsync'd, in its run folder.

The first line names the bisection (its plan and settings); every other line is what one
call of the measure function gave for one stack: launches, or why the stack was
untestable. Replaying the log gives a new Bisection every measurement already made, so a
killed bisection resumes without building or measuring anything twice. A log of another
bisection is refused; a torn last line (a kill mid-write) is dropped with a warning under
the results file's own rule (results_contract.parse_jsonl), and cut off before the next append.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune.bisect.component_ranges import BisectError

LOG_NAME = "bisect.jsonl"
SCHEMA = 1
HEADER, LAUNCHES, UNTESTABLE = "bisect", "launches", "untestable"


def stack_key(stack: Mapping[str, Any]) -> str:
    return json.dumps(dict(stack), sort_keys=True)


class BisectLog:
    def __init__(self, run_dir: str | os.PathLike[str], header: Mapping[str, Any]) -> None:
        self.path = Path(run_dir) / LOG_NAME
        self.header = {"schema": SCHEMA, "kind": HEADER, **header}
        self.records: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size:
            self._replay()
        else:
            self._append(self.header)

    def _replay(self) -> None:
        data = self.path.read_bytes()
        try:
            records, self.warnings = contract.parse_jsonl(data, str(self.path))
        except contract.ResultsFormatError as exc:
            raise BisectError(f"{self.path}: a damaged log ({exc})") from None
        if not records and self.warnings:  # killed while writing the header: nothing measured yet
            self.path.write_bytes(b"")
            self.warnings = []
            self._append(self.header)
            return
        if not records or _plain(records[0]) != _plain(self.header):
            raise BisectError(
                f"{self.path}: the log of another bisection (good, bad, candidates or settings differ); "
                "use a new run folder"
            )
        self.records = records[1:]
        if not data.endswith(b"\n"):
            # A whole last object without its newline was kept: end its line. A torn one was
            # dropped: cut it off, so the next line does not start inside it.
            keep = len(data) if self.warnings == [] else data.rfind(b"\n") + 1
            with open(self.path, "r+b") as handle:
                handle.truncate(keep)
                handle.seek(keep)
                if keep == len(data):
                    handle.write(b"\n")
                handle.flush()
                os.fsync(handle.fileno())

    def _append(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def launches(self, stack: Mapping[str, Any], launches: list[list[float]]) -> None:
        record = {"kind": LAUNCHES, "stack": dict(stack), "launches": launches}
        self._append(record)
        self.records.append(record)

    def untestable(self, stack: Mapping[str, Any], stage: str, reason: str) -> None:
        record = {"kind": UNTESTABLE, "stack": dict(stack), "stage": stage, "reason": reason}
        self._append(record)
        self.records.append(record)


def _plain(record: Mapping[str, Any]) -> Any:
    """A record as JSON reads it back (tuples become lists), for comparing with the header."""
    return json.loads(json.dumps(dict(record), sort_keys=True))
