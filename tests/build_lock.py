"""One builder at a time for what tests build under build/ and share.

`make test` runs pytest on several worker processes (pytest-xdist): two test files on two
workers may both find a cached build missing. The first to take the lock builds; the
other waits, then finds it built.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created, with its folder) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
