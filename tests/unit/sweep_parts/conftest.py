"""Fixtures for the node-side sweep parts: a streaming test server in its own process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture
def sse_server() -> Iterator[Callable[..., int]]:
    """Factory: start sse_server.py with the given options; returns its port."""
    procs: list[subprocess.Popen[str]] = []

    def start(*opts: str) -> int:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "sse_server.py"), "--port", "0", *opts],
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"test server did not start: {line!r}"
        return int(line.split()[1])

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)
