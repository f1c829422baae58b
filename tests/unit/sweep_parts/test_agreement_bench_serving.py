"""Our benchmark client and SGLang's own `sglang.bench_serving` measure the same workload on
the same stand-in server alike: output throughput, median TTFT and median ITL within 3%.

Ground truth for ITL: the stand-in runs under standin_sendlog.py, which records when the
server handed each streamed event to the socket, so each client's median ITL is also
checked against the median gap the server really sent (bench_serving timestamps after
parsing, which can bunch gaps; notes/sglang.md "How SGLang measures").

Needs build/bench-serving (tests/standin/make_bench_venv.sh; minutes the first time, then
cached). The test itself takes about a minute.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils.bench_client import Workload, run_workload

from .bench_serving_env import ensure_bench_serving, run_bench_serving

HERE = Path(__file__).parent
REPO = HERE.parents[2]
MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
# The default profile's SM120 baseline: 16 running requests decode at ~25 ms per step.
FLAGS = ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass", "--tp-size", "8"]
# 3 closed-loop rounds of 16: 6,144 tokens, ~6,000 token gaps per client for the medians.
INPUT_LEN, OUTPUT_LEN, CONCURRENCY, NUM_PROMPTS = 1024, 128, 16, 48
TOLERANCE = 0.03


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def close(a: float, b: float, tolerance: float = TOLERANCE) -> bool:
    return abs(a / b - 1) <= tolerance


def median_gap_ms(streams: list[list[float]]) -> float:
    return 1000 * statistics.median(b - a for times in streams for a, b in itertools.pairwise(times))


@pytest.fixture(scope="module")
def bench_python() -> Path:
    return ensure_bench_serving()


class SendLoggedStandin:
    """A stand-in under standin_sendlog.py on a free port; stop() returns its send log."""

    def __init__(self, workdir: Path) -> None:
        self.port, self.log, self.console = free_port(), workdir / "sendlog.json", workdir / "standin.log"
        env = {**os.environ, "BWTUNE_STANDIN_STARTUP_SCALE": "0.001", "BWTUNE_STANDIN_SEED": "1"}
        env.pop("BWTUNE_STANDIN_PROFILE", None)
        env.pop("BWTUNE_STANDIN_FAULT", None)
        argv = [sys.executable, str(HERE / "standin_sendlog.py"), str(self.log), "--model-path", str(MODEL),
                "--host", "127.0.0.1", "--port", str(self.port), *FLAGS]  # fmt: skip
        with open(self.console, "w") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, self.console.read_text()
            assert time.monotonic() < deadline, f"stand-in not healthy in {timeout} s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.05)

    def stop(self) -> dict[str, Any]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=30) == 0, self.console.read_text()
        data: dict[str, Any] = json.loads(self.log.read_text())
        return data


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[SendLoggedStandin]:
    server = SendLoggedStandin(tmp_path)
    try:
        server.wait_healthy()
        yield server
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


@pytest.mark.slow
def test_bwtune_and_bench_serving_agree_on_the_standin(
    bench_python: Path, standin: SendLoggedStandin
) -> None:
    port = standin.port
    workload = Workload(
        input_len=INPUT_LEN, output_len=OUTPUT_LEN, num_prompts=NUM_PROMPTS, concurrency=CONCURRENCY, warmup=1
    )
    ours = run_workload("127.0.0.1", port, workload)["repetitions"][0]
    theirs = run_bench_serving(
        f"http://127.0.0.1:{port}",
        input_len=INPUT_LEN,
        output_len=OUTPUT_LEN,
        num_prompts=NUM_PROMPTS,
        concurrency=CONCURRENCY,
    )
    sent = standin.stop()

    # Same workload really ran: every request got all its tokens, in both clients.
    assert ours["completed"] == theirs["completed"] == NUM_PROMPTS
    assert theirs["total_output_tokens"] == NUM_PROMPTS * OUTPUT_LEN
    assert theirs["total_input_tokens"] == NUM_PROMPTS * INPUT_LEN

    report = {m: (ours[m], theirs[m]) for m in ("output_throughput", "median_ttft_ms", "median_itl_ms")}
    for metric, (a, b) in report.items():
        assert close(a, b), f"{metric}: bwtune {a:.3f} vs bench_serving {b:.3f} (all: {report})"

    # What the server really sent, per client run. Both warmups ask for fewer tokens, so the
    # full-length streams are ours (48) then bench_serving's (48), in order of their start.
    full = [times for times in sent["sends"] if len(times) == OUTPUT_LEN]
    assert len(full) == 2 * NUM_PROMPTS, len(full)
    true_ours, true_theirs = median_gap_ms(full[:NUM_PROMPTS]), median_gap_ms(full[NUM_PROMPTS:])
    # One event per token: the chunk gaps a client sees are the token gaps.
    assert close(ours["median_itl_ms"], true_ours), (ours["median_itl_ms"], true_ours)
    # bench_serving's gap bias (timestamps after parsing) appears when the event loop is busy
    # relative to the gap (~2 ms tokens, notes); at ~25 ms it stays within the tolerance too.
    assert close(theirs["median_itl_ms"], true_theirs), (theirs["median_itl_ms"], true_theirs)
    # And the server sent what its simulated schedule planned: decode steps of the full batch.
    planned = [s for kind, batch, s in sent["steps"] if kind == "decode" and batch == CONCURRENCY]
    assert close(true_ours, 1000 * statistics.median(planned)), (true_ours, statistics.median(planned))
    print(
        "simulated stand-in, 16 x 1024 in / 128 out:",
        {
            **{m: [round(v, 3) for v in pair] for m, pair in report.items()},
            "true_median_gap_ms": [true_ours, true_theirs],
        },
    )
