"""Reading a node's results file: parsed and checked line by line under the results
contract's one torn-last-line rule, by worker processes for a big file."""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_jsonl
from bwtune.store.lines import canonical_text, load_line

ResultsFormatError = contract.ResultsFormatError


@dataclass(frozen=True)
class ResultsFileContent:
    records: list[dict[str, Any]]
    warnings: list[str]  # e.g. a torn last line that was skipped


def read_results_file(
    path: str | Path, *, run_id: str | None = None, skip_bad_lines: bool = False
) -> ResultsFileContent:
    """Parse and check a node's results file under the contract's one torn-last-line rule
    (the node's own reader uses the same): a torn last line is skipped with a warning, a
    damaged line elsewhere raises ResultsFormatError naming it, or with `skip_bad_lines`
    (`bwtune import --skip-bad-lines`) is skipped with a warning naming it. `run_id`
    replaces the lines' run ids before they are checked."""
    if run_id is not None:
        contract.check_run_id(run_id, "--run-id")
    source = Path(path)
    if not source.is_file() and source.exists():
        raise ResultsFormatError(f"{source}: not a regular file")
    try:
        records, warnings = contract.read_jsonl(
            str(source), validate=True, run_id=run_id, skip_damaged=skip_bad_lines
        )
    except OSError as exc:
        raise ResultsFormatError(f"{source}: cannot read results file: {exc.strerror or exc}") from None
    return ResultsFileContent(records, warnings)


def iter_results_file(
    path: str | Path,
    *,
    run_id: str | None = None,
    skip_bad_lines: bool = False,
    warnings: list[str] | None = None,
    workers: int | None = None,
) -> Iterator[tuple[dict[str, Any], str]]:
    """(checked record, its canonical JSON) for each line of a results file, read one line at
    a time under results_contract.parse_jsonl's rules (the same messages); warnings are
    appended to `warnings`. A big file is parsed, checked and encoded by `workers` processes
    (default: PARALLEL_IMPORT_WORKERS, for a file of PARALLEL_IMPORT_BYTES or more, where
    more than two CPUs are free to this process), in order, a bounded number of chunks ahead.
    The workers are spawned: a script that imports a big file calls this under
    `if __name__ == "__main__":` (the bwtune CLI does)."""
    source = Path(path)
    handle = open_results_file(source, run_id=run_id)
    notes = warnings if warnings is not None else []
    with handle:
        if workers is None:
            workers = _import_workers(handle)
        if workers > 1:
            yield from _iter_parallel(handle, str(source), run_id, skip_bad_lines, notes, workers)
            return
        for number, raw in enumerate(handle, start=1):
            checked = _check_raw_line(raw, f"{source}:{number}", run_id, skip_bad_lines, notes)
            if checked is not None:
                yield checked


def _check_raw_line(
    raw: bytes, where: str, run_id: str | None, skip_bad_lines: bool, notes: list[str]
) -> tuple[dict[str, Any], str] | None:
    """One line: (checked record, canonical JSON), or None when it is skipped (a note says why)."""
    if not raw.strip():
        return None
    if raw.endswith(b"\n"):
        try:
            obj, by_orjson = load_line(raw)
        except ValueError as exc:
            if not skip_bad_lines:
                raise ResultsFormatError(f"{where}: not a JSON line ({exc})") from None
            notes.append(f"{where}: skipped a line that is not JSON ({exc})")
            return None
    else:  # the last line, without its newline: torn, unless it is a whole object
        obj, by_orjson = contract.complete_json_object(raw), False
        if obj is None:
            notes.append(
                f"{where}: skipped a torn last line ({len(raw)} bytes, no newline: a write cut short)"
            )
            return None
    try:
        record = results_jsonl._checked(obj, where, True, run_id)
    except ResultsFormatError as exc:
        if not skip_bad_lines:
            raise
        notes.append(contract.skipped_line_warning(str(exc), obj))
        return None
    return record, canonical_text(record, by_orjson)


PARALLEL_IMPORT_BYTES = 64 * 1024 * 1024  # files this big are parsed by worker processes
PARALLEL_IMPORT_WORKERS = 4  # at most: each is ~40 MB, the import's whole budget 500 MB
_CHUNK_LINES = 200  # lines a worker gets at a time
_CHUNKS_AHEAD = 3  # chunks in flight per worker: bounds what is read ahead of the store


def _import_workers(handle: BinaryIO) -> int:
    try:
        size = os.fstat(handle.fileno()).st_size
        cpus = len(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return 1
    if size < PARALLEL_IMPORT_BYTES or cpus <= 2:
        return 1
    return min(PARALLEL_IMPORT_WORKERS, cpus - 1)


def _check_chunk(
    source: str, run_id: str | None, skip_bad_lines: bool, chunk: list[tuple[int, bytes]]
) -> list[tuple[str, Any]]:
    """A worker's share: each line's ("line", canonical JSON, None), ("note", warning) or, at the
    first line that stops the import, ("raise", the exception); in file order."""
    out: list[tuple[str, Any]] = []
    for number, raw in chunk:
        notes: list[str] = []
        try:
            checked = _check_raw_line(raw, f"{source}:{number}", run_id, skip_bad_lines, notes)
        except Exception as exc:  # re-raised by the reader, in order
            out.append(("raise", exc))
            return out
        out += [("note", note) for note in notes]
        if checked is not None:
            out.append(("line", checked[1]))
    return out


def _iter_parallel(
    handle: BinaryIO, source: str, run_id: str | None, skip_bad_lines: bool, notes: list[str], workers: int
) -> Iterator[tuple[dict[str, Any], str]]:
    """iter_results_file's lines, parsed, checked and encoded in `workers` processes; this one
    parses each canonical line back (the record it stores from) and raises what a worker raised.
    The workers end with the import, whatever ends it."""
    pending: deque[Future[list[tuple[str, Any]]]] = deque()
    lines = enumerate(handle, start=1)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        while True:
            while len(pending) < workers * _CHUNKS_AHEAD:
                chunk = list(islice(lines, _CHUNK_LINES))
                if not chunk:
                    break
                pending.append(pool.submit(_check_chunk, source, run_id, skip_bad_lines, chunk))
            if not pending:
                return
            for kind, value in pending.popleft().result():
                if kind == "raise":
                    raise value
                if kind == "note":
                    notes.append(value)
                else:
                    yield load_line(value.encode())[0], value
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def open_results_file(path: str | Path, *, run_id: str | None = None) -> BinaryIO:
    """The results file opened for reading, after the checks that need no line of it (the
    `--run-id`, a regular file): ResultsFormatError (ValueError for the run id) otherwise."""
    if run_id is not None:
        contract.check_run_id(run_id, "--run-id")
    source = Path(path)
    if not source.is_file() and source.exists():
        raise ResultsFormatError(f"{source}: not a regular file")
    try:
        return source.open("rb")
    except OSError as exc:
        raise ResultsFormatError(f"{source}: cannot read results file: {exc.strerror or exc}") from None
