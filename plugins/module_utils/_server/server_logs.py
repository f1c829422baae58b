# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A server's log: its tail, its failure class, a lost bind, and one new file per start."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import failure_classifier

LOG_TAIL_LINES = 50


# The bind error of a server whose port was taken between the check and its bind (uvicorn's
# wording, and the errno's): the launch is retried on another port, it is not the config's fault.
_ADDRESS_IN_USE = re.compile(r"address already in use|\[Errno 98\]|EADDRINUSE", re.I)
# uvicorn's bind error names the address: ('127.0.0.1', 30000).
_BIND_PORT = re.compile(r"bind on address \(.*?,\s*(\d+)\)")
# How much of a log the failure class and the lost-port check read: a bind error is not the
# last line (SGLang's warmup thread still waits up to 120 s for the port, then logs its own
# traceback, and the scheduler processes theirs as they are killed).
CLASSIFY_TAIL_LINES = 400


def address_in_use(lines: Sequence[str]) -> bool:
    """The server could not bind its port: another process took it after the port was chosen."""
    return any(_ADDRESS_IN_USE.search(line) for line in lines)


def lost_port(log_path: str, port: int) -> bool:
    """The server's log says it could not bind `port`: another process took it after it was
    chosen. Read as far back as the failure class is (CLASSIFY_TAIL_LINES), not the last few
    lines. A bind error that names another port (NCCL's, a ZMQ socket's) is not this race."""
    for line in log_tail(log_path, CLASSIFY_TAIL_LINES):
        if not _ADDRESS_IN_USE.search(line):
            continue
        named = _BIND_PORT.search(line)
        if named is None or int(named.group(1)) == port:
            return True
    return False


def launch_log_path(log_dir: str, name: str) -> str:
    """A new log file for one start of `name`: `<name>.log` for the first, then `<name>.2.log`,
    `<name>.3.log`, ...: a start again (a lost port, a repetition, a re-measure, a resume)
    never overwrites the log of an earlier one, a crash's included."""
    path = os.path.join(log_dir, "%s.log" % name)
    number = 1
    while os.path.lexists(path):
        number += 1
        path = os.path.join(log_dir, "%s.%d.log" % (name, number))
    return path


def classify_failure(lines: Sequence[str], *, exited: bool, returncode: int | None) -> tuple[str, str]:
    """(failure class, the log line that shows it) for a server that did not become healthy.

    Read from the traceback (frames, exception, SGLang's phrases): failure_classifier.py."""
    return failure_classifier.classify_failure(lines, exited=exited, returncode=returncode)


def log_tail(path: str, n: int = LOG_TAIL_LINES, max_bytes: int = 256 * 1024) -> list[str]:
    """The last n lines of a log (decoded leniently), or [] if it does not exist."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").replace("\r", "\n").split("\n")
    if size > max_bytes:
        lines = lines[1:]  # the first line is cut
    while lines and not lines[-1].strip():
        lines.pop()
    return lines[-n:]
