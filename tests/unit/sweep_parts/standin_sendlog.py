"""Run `bwtune-standin` and log when it really sent each streamed event: the ground truth
that client-side timings are judged against.

    python standin_sendlog.py LOG.json <bwtune-standin argv...>

The stand-in's own code runs unchanged; three of its methods are wrapped to record
  - `sends`: for every streamed response, the perf_counter time at which each `data: {...}`
    event was handed to the socket (one event per simulated step that gave it tokens);
  - `arrivals`: for the same responses, in the same order, when the server had read the
    request and started the response (the request is submitted to the engine right after),
    so `sends[i][0] - arrivals[i]` is the TTFT the server really gave;
  - `steps`: every step the simulated GPU planned, as [kind, running batch, seconds].
perf_counter is CLOCK_MONOTONIC: the times compare with a client's on the same machine.
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
arrivals: list[float | None] = []
steps: list[tuple[str, int, float]] = []

_start = Stream.start
_send = Stream.send


def _logged_start(self: Stream, *args: Any, **kwargs: Any) -> None:
    self.__dict__["_arrival"] = time.perf_counter()
    _start(self, *args, **kwargs)


_plan_step = BatchSimulator.plan_step


def _logged_send(self: Stream, data: bytes) -> None:
    if data.startswith(b"data: {"):
        times = self.__dict__.get("_sendlog")
        if times is None:
            times = self.__dict__["_sendlog"] = []
            sends.append(times)
            arrivals.append(self.__dict__.get("_arrival"))
        times.append(time.perf_counter())
    _send(self, data)


def _logged_plan_step(self: BatchSimulator) -> float:
    seconds = _plan_step(self)
    kind = "prefill" if self._admitted else "decode"
    steps.append((kind, len(self._admitted) if self._admitted else len(self.running), seconds))
    return seconds


def main() -> int:
    log, argv = Path(sys.argv[1]), sys.argv[2:]
    Stream.start = _logged_start
    Stream.send = _logged_send
    BatchSimulator.plan_step = _logged_plan_step
    try:
        return standin.main(argv)
    finally:
        record: dict[str, Any] = {"sends": sends, "arrivals": arrivals, "steps": steps}
        log.write_text(json.dumps(record))


if __name__ == "__main__":
    sys.exit(main())
