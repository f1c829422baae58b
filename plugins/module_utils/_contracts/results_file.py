# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The node's results file: one JSON line per config, append-only, durable, resumable.

Every line is written with write + flush + fsync before the next launch starts (and the
directory is fsynced when the file is created), so a kill loses at most the config in
flight. A kill in the middle of a write leaves a torn last line: readers skip it (the one
rule of results_contract.parse_jsonl, which `bwtune import` uses too) and the next append
cuts it off first. Beside the file, `<results>.inflight.json` names the server being
measured (pid, process group, start time, port) so the next run can stop a leftover server.
"""

from __future__ import annotations

import fcntl
import json
import os
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract

# A results file that cannot be read; the message names the file and line.
ResultsFileError = results_contract.ResultsFormatError


def _fsync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: str, data: dict[str, Any]) -> None:
    """Replace `path` with `data` so a reader sees the old or the new content, never half."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path)


class ResultsFile:
    """One results file on the node (JSON lines; see docs/architecture.md for a line's shape)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.inflight_path = path + ".inflight.json"

    # -- writing

    def append(self, line: dict[str, Any]) -> None:
        """Append one line durably (write, flush, fsync); cuts off a torn last line first."""
        data = (json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n").encode()
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        created = not os.path.exists(self.path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # one writer at a time, even across processes
            self._cut_torn_tail(fd)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the lock
        if created:
            _fsync_dir(self.path)

    @staticmethod
    def _cut_torn_tail(fd: int) -> None:
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        # Find the last newline; what follows it is a line without its newline.
        pos, keep = size, 0
        while pos > 0:
            start = max(0, pos - 65536)
            block = os.pread(fd, pos - start, start)
            i = block.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            pos = start
        if results_contract.complete_json_object(os.pread(fd, size - keep, keep)) is not None:
            # A whole line that lost only its newline: readers keep it, so keep it here too.
            os.write(fd, b"\n")
        else:
            os.ftruncate(fd, keep)  # a line a kill cut short: readers skip it
        os.fsync(fd)

    # -- reading

    def read(self) -> list[dict[str, Any]]:
        """Every complete line, in order (results_contract.parse_jsonl: a torn last line is
        skipped; a bad line elsewhere raises ResultsFileError naming it)."""
        try:
            records, _warnings = results_contract.read_jsonl(self.path)
        except FileNotFoundError:
            return []
        return records

    def read_checked(self) -> tuple[list[dict[str, Any]], list[str]]:
        """(every line that is a results line, warnings): like read(), but a JSON object that
        is not a results line (results_contract.validate_line) is skipped with a warning
        naming its line, so its config counts as not measured (a resume measures it again);
        a line that is not JSON at all still raises ResultsFileError."""
        try:
            return results_contract.read_jsonl(self.path, validate=True, skip_invalid=True)
        except FileNotFoundError:
            return [], []

    def measured(
        self, stack_fingerprint: str | None, lines: list[dict[str, Any]] | None = None
    ) -> dict[str, dict[str, Any]]:
        """config_id -> its latest launched line for this stack (what a resume skips), of
        `lines` (else the file's results lines: read_checked)."""
        done: dict[str, dict[str, Any]] = {}
        for line in self.read_checked()[0] if lines is None else lines:
            if not results_contract.is_launched(line.get("status")):
                continue
            if line.get("stack_fingerprint") != stack_fingerprint or "config_id" not in line:
                continue
            done[str(line["config_id"])] = line
        return done

    def is_measured(self, config_id: str, stack_fingerprint: str | None) -> bool:
        return config_id in self.measured(stack_fingerprint)

    def config_ids(self, run_id: str | None = None) -> set[str]:
        """Ids of the configs with a line (in run `run_id` when given)."""
        return {
            str(line["config_id"])
            for line in self.read()
            if "config_id" in line and (run_id is None or line.get("run_id") == run_id)
        }

    # -- the server in flight

    def mark_inflight(self, record: dict[str, Any]) -> None:
        """Record the server being measured (launcher.ServerHandle.record() plus config_id)."""
        os.makedirs(os.path.dirname(os.path.abspath(self.inflight_path)), exist_ok=True)
        write_json_atomic(self.inflight_path, record)

    def read_inflight(self) -> dict[str, Any] | None:
        try:
            with open(self.inflight_path) as f:
                obj = json.load(f)
        except (FileNotFoundError, ValueError):
            return None
        return obj if isinstance(obj, dict) else None

    def clear_inflight(self) -> None:
        try:
            os.unlink(self.inflight_path)
        except FileNotFoundError:
            return
        _fsync_dir(self.inflight_path)
