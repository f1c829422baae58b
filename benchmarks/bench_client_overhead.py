"""Client CPU cost: bwtune's benchmark client vs `python -m sglang.bench_serving`.

Both clients run against the same server, at the same token rate, output length, concurrency
and streaming mode (native /generate, stream, input_ids: bench_serving with
--tokenize-prompt). The server is either
  - `standin` (default): bwtune-standin with the default profile made uniformly fast
    (--step-ms per decode step at any batch size; timing simulated), run under
    tests/unit/sweep_parts/standin_sendlog.py so the gaps it really sent are known; or
  - `sse`: the minimal SGLang-shaped test server tests/unit/sweep_parts/sse_server.py
    (one thread per stream sleeping to absolute deadlines, --itl-ms per token).

Each client runs in its own process through a driver that counts the process's CPU
(getrusage RUSAGE_SELF, user + sys, all threads) only while it benchmarks:
benchmarks/client_cpu_bwtune.py around our BenchClient, benchmarks/client_cpu_bench_serving.py
around bench_serving's own `benchmark()` (its CLI parser builds the args, as the command
does). Two windows: `stream` (from the measured run's first request to its last response:
the per-token cost) and `benchmark` (the whole benchmark call: warmup, run, metrics).
Imports and start-up are outside both; the whole process (from the kernel's child rusage,
start-up included) is reported for context. Clients alternate, --repeats times; medians and
ranges are printed. Each run's true median token gap comes from the server's send log
(perf_counter is CLOCK_MONOTONIC, shared by the processes), next to the client's median ITL.

    .venv/bin/python benchmarks/bench_client_overhead.py [--server standin|sse] [--step-ms 8] ...

Needs build/bench-serving (tests/standin/make_bench_venv.sh, run here if missing).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.unit.sweep_parts.bench_serving_env import (  # noqa: E402
    OFFLINE,
    bench_serving_argv,
    ensure_bench_serving,
)

PARTS = ROOT / "tests" / "unit" / "sweep_parts"
MODEL = ROOT / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
STANDIN_FLAGS = [
    "--quantization",
    "modelopt_fp4",
    "--moe-runner-backend",
    "flashinfer_cutlass",
    "--tp-size",
    "8",
]

BENCH = ROOT / "benchmarks"


def median_gap_ms(streams: list[list[float]]) -> float:
    return statistics.median(b - a for t in streams for a, b in itertools.pairwise(t)) * 1000


class SseServer:
    """tests/unit/sweep_parts/sse_server.py: --itl-ms per token, its send times at /stats."""

    def __init__(self, a: argparse.Namespace, workdir: Path) -> None:
        self.output_len = a.output_len
        self.label = f"sse_server.py, {a.itl_ms:g} ms/token"
        argv = [sys.executable, str(PARTS / "sse_server.py"), "--port", "0",
                "--itl-ms", str(a.itl_ms), "--ttft-ms", str(a.ttft_ms)]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline().split()[1])

    def stop(self) -> list[list[float]]:
        """Stop; the send times of the tokens it really sent, per full-length stream."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats") as r:
            sends = json.loads(r.read())["sends"]
        self.proc.terminate()
        self.proc.wait()
        return [s["times"] for s in sends if len(s["times"]) == self.output_len]


class Standin:
    """bwtune-standin (simulated timing): the default profile with every decode step
    --step-ms long at any batch size, under standin_sendlog.py (the events it really sent)."""

    def __init__(self, a: argparse.Namespace, workdir: Path) -> None:
        import yaml

        from bwtune.standin.profile import DEFAULT_PROFILE, PROFILES_DIR

        self.output_len = a.output_len
        self.label = f"bwtune-standin (simulated), {a.step_ms:g} ms per decode step"
        profile = yaml.safe_load((PROFILES_DIR / f"{DEFAULT_PROFILE}.yml").read_text())
        profile["name"] = "bench-client-overhead"
        profile["decode"]["baseline"]["step_ms"] = {1: a.step_ms, 1024: a.step_ms}
        profile["decode"]["adjustments"] = []
        profile_path = workdir / "profile.yml"
        profile_path.write_text(yaml.safe_dump(profile))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.log = workdir / "sendlog.json"
        env = dict(os.environ, BWTUNE_STANDIN_PROFILE=str(profile_path), BWTUNE_STANDIN_STARTUP_SCALE="0")
        env.pop("BWTUNE_STANDIN_FAULT", None)
        argv = [sys.executable, str(PARTS / "standin_sendlog.py"), str(self.log), "--model-path", str(MODEL),
                "--host", "127.0.0.1", "--port", str(self.port), *STANDIN_FLAGS]  # fmt: skip
        self.proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                sys.exit(f"bwtune-standin did not become healthy: {err}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.05)

    def stop(self) -> list[list[float]]:
        """Stop; the send times of the events it really sent, per full-length stream."""
        self.proc.terminate()
        self.proc.wait(timeout=30)
        sends = json.loads(self.log.read_text())["sends"]
        return [t for t in sends if len(t) == self.output_len]


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_client(name: str, port: int, a: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """One client run through its driver: its in-process figures plus whole-process CPU and
    the perf_counter window it ran in (to pick its streams out of the send log)."""
    out = workdir / f"{name}.json"
    out.unlink(missing_ok=True)
    if name == "bwtune":
        argv = [sys.executable, str(BENCH / "client_cpu_bwtune.py"), str(out), str(port), str(a.num_prompts),
                str(a.concurrency), str(a.input_len), str(a.output_len)]  # fmt: skip
        env = None
    else:
        cli = bench_serving_argv(
            f"http://127.0.0.1:{port}",
            input_len=a.input_len,
            output_len=a.output_len,
            num_prompts=a.num_prompts,
            concurrency=a.concurrency,
            output_file=workdir / "bench_serving.jsonl",
        )
        argv = [cli[0], str(BENCH / "client_cpu_bench_serving.py"), str(out), *cli[1:]]
        env = dict(os.environ, **OFFLINE)
    before, t0 = child_cpu(), time.perf_counter()
    run = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=1800)
    t1, process_cpu = time.perf_counter(), child_cpu() - before
    if run.returncode != 0 or not out.exists():
        sys.exit(f"{name} driver: exit {run.returncode}\n{run.stderr[-3000:]}")
    fig: dict[str, Any] = json.loads(out.read_text())
    fig.update(process_cpu_s=process_cpu, window=(t0, t1))
    return fig


def per_1k(fig: dict[str, Any], key: str) -> float:
    return float(fig[key]) / fig["tokens"] * 1000


def spread(values: list[float], fmt: str = ".4f") -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--server", choices=("standin", "sse"), default="standin")
    p.add_argument("--step-ms", type=float, default=8.0, help="standin: decode step (one token per stream)")
    p.add_argument("--itl-ms", type=float, default=2.0, help="sse: gap between tokens")
    p.add_argument("--ttft-ms", type=float, default=20.0, help="sse: time to the first token")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--num-prompts", type=int, default=128, help="measured requests per client run")
    p.add_argument("--repeats", type=int, default=3, help="runs per client, alternating")
    p.add_argument("--json", help="also write every run's figures here")
    a = p.parse_args()
    ensure_bench_serving()
    runs: dict[str, list[dict[str, Any]]] = {"bwtune": [], "bench_serving": []}
    with tempfile.TemporaryDirectory() as tmp:
        server = (Standin if a.server == "standin" else SseServer)(a, Path(tmp))
        try:
            for i in range(a.repeats):
                order = ("bwtune", "bench_serving") if i % 2 == 0 else ("bench_serving", "bwtune")
                for name in order:
                    runs[name].append(run_client(name, server.port, a, Path(tmp)))
        finally:
            streams = server.stop()
    for fig in (f for rs in runs.values() for f in rs):
        t0, t1 = fig["window"]
        fig["server_median_gap_ms"] = median_gap_ms([s for s in streams if t0 < s[0] < t1])

    print(
        f"workload: /generate stream, {a.concurrency} concurrent, {a.input_len} in / {a.output_len} out, "
        f"{a.num_prompts} prompts per run, {a.repeats} runs per client alternating; server: {server.label}"
    )
    print("CPU seconds per 1,000 streamed tokens, median (min-max):")
    head = ("client", "streaming", "benchmark call", "whole process", "start-up CPU-s")
    print("{:<14} {:>24} {:>24} {:>24} {:>16}".format(*head))
    for name, rs in runs.items():
        print(
            f"{name:<14} {spread([per_1k(f, 'stream_cpu_s') for f in rs]):>24} "
            f"{spread([per_1k(f, 'benchmark_cpu_s') for f in rs]):>24} "
            f"{spread([per_1k(f, 'process_cpu_s') for f in rs]):>24} "
            f"{spread([f['process_cpu_s'] - f['benchmark_cpu_s'] for f in rs], '.1f'):>16}"
        )
    print(
        "per run: client, tokens, stream CPU-s, out tok/s, median TTFT ms, median ITL ms (server's real gap)"
    )
    for name, rs in runs.items():
        for f in rs:
            m = f["metrics"]
            print(
                f"  {name:<14} {f['tokens']:>7} {f['stream_cpu_s']:>7.3f} {m['output_throughput']:>8.0f} "
                f"{m['median_ttft_ms']:>8.2f} {m['median_itl_ms']:>7.3f} ({f['server_median_gap_ms']:.3f})"
            )
    ours = [per_1k(f, "stream_cpu_s") for f in runs["bwtune"]]
    theirs = [per_1k(f, "stream_cpu_s") for f in runs["bench_serving"]]
    pairs = [o / t for o, t in zip(ours, theirs, strict=True)]
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(
        f"bwtune / bench_serving streaming CPU per token: {ratio:.2f} of medians; "
        f"per run pair {', '.join(f'{r:.2f}' for r in pairs)} (target <= 0.5)"
    )
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "runs": runs, "cpu_ratio": ratio}, indent=2))


if __name__ == "__main__":
    main()
