"""Run `bwtune-standin` and log when it really sent each streamed event: the ground truth
that client-side timings are judged against.

    python standin_sendlog.py LOG.json <bwtune-standin argv...>

The stand-in's own code runs unchanged; two of its methods are wrapped to record
  - `sends`: for every streamed response, the perf_counter time at which each `data: {...}`
    event was handed to the socket (one event per simulated step that gave it tokens);
  - `steps`: every step the simulated GPU planned, as [kind, running batch, seconds].
The log is written when the server exits (SIGTERM).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from bwtune.standin import __main__ as standin
from bwtune.standin.batch import BatchSimulator
from bwtune.standin.httpserver import Stream

sends: list[list[float]] = []
steps: list[tuple[str, int, float]] = []

_send = Stream.send
_plan_step = BatchSimulator.plan_step


def _logged_send(self: Stream, data: bytes) -> None:
    if data.startswith(b"data: {"):
        times = self.__dict__.get("_sendlog")
        if times is None:
            times = self.__dict__["_sendlog"] = []
            sends.append(times)
        times.append(time.perf_counter())
    _send(self, data)


def _logged_plan_step(self: BatchSimulator) -> float:
    seconds = _plan_step(self)
    kind = "prefill" if self._admitted else "decode"
    steps.append((kind, len(self._admitted) if self._admitted else len(self.running), seconds))
    return seconds


def main() -> int:
    log, argv = Path(sys.argv[1]), sys.argv[2:]
    Stream.send = _logged_send
    BatchSimulator.plan_step = _logged_plan_step
    try:
        return standin.main(argv)
    finally:
        record: dict[str, Any] = {"sends": sends, "steps": steps}
        log.write_text(json.dumps(record))


if __name__ == "__main__":
    sys.exit(main())
