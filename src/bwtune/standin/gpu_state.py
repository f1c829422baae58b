"""Simulated GPU memory: each running stand-in records what it holds; the fake nvidia-smi
adds it up.

A stand-in writes `<state dir>/<pid>.json` = {"pid", "gpus": [index...], "used_mib",
"port", "held_until"}; it rewrites the file as its memory grows (weights, then KV cache and
graphs) and on a clean exit sets `held_until` (now + BWTUNE_STANDIN_RELEASE_DELAY_S) instead
of deleting it, so a test can see memory released late, as drivers sometimes do. A record
counts while its pid is alive or until `held_until`; a killed process releases at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

STATE_DIR_ENV = "BWTUNE_STANDIN_STATE_DIR"
RELEASE_DELAY_ENV = "BWTUNE_STANDIN_RELEASE_DELAY_S"


def state_dir() -> Path:
    configured = os.environ.get(STATE_DIR_ENV)
    return Path(configured) if configured else Path(f"/tmp/bwtune-standin-{os.getuid()}")


@dataclass(frozen=True)
class Holder:
    pid: int
    gpus: list[int]
    used_mib: int
    port: int


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) holds no GPU memory.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def holders(now: float | None = None) -> list[Holder]:
    """Processes holding simulated GPU memory right now."""
    now = time.time() if now is None else now
    found = []
    directory = state_dir()
    if not directory.is_dir():
        return []
    for path in sorted(directory.glob("*.json")):
        try:
            record = json.loads(path.read_text())
            pid = int(record["pid"])
            held_until = record.get("held_until")
            holding = held_until is not None and now < float(held_until)
            if not holding and held_until is None:
                holding = _alive(pid)
            if holding:
                found.append(
                    Holder(
                        pid, [int(g) for g in record["gpus"]], int(record["used_mib"]), int(record["port"])
                    )
                )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a record being rewritten or a stray file: skip it this time
    return found


class MemoryRecord:
    """The running stand-in's own record."""

    def __init__(self, gpus: list[int], port: int) -> None:
        self.gpus, self.port, self.used_mib = gpus, port, 0
        self.path = state_dir() / f"{os.getpid()}.json"

    def set_used(self, used_mib: int) -> None:
        self.used_mib = used_mib
        self._write(None)

    def release(self) -> None:
        delay = float(os.environ.get(RELEASE_DELAY_ENV, "0") or 0)
        if delay > 0:
            self._write(time.time() + delay)
        else:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def _write(self, held_until: float | None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        record = {"pid": os.getpid(), "gpus": self.gpus, "used_mib": self.used_mib, "port": self.port}
        record["held_until"] = held_until
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.path)
