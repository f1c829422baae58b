"""Client CPU cost: bwtune's benchmark client vs `python -m sglang.bench_serving`.

Both clients run against the same server, at the same token rate, output length, concurrency
and streaming mode (native /generate, stream, input_ids). The server is either
  - `standin` (default): bwtune-standin with the default profile made uniformly fast
    (--step-ms per decode step at any batch size; timing simulated), run under
    tests/unit/sweep_parts/standin_sendlog.py so the gaps it really sent are known; or
  - `sse`: the minimal SGLang-shaped test server tests/unit/sweep_parts/sse_server.py
    (one thread per stream sleeping to absolute deadlines, --itl-ms per token).
Each client runs as its own process; its CPU time (user + sys, from the kernel's child
rusage) is measured for a large and a small run, and the difference divided by the
difference in streamed tokens gives CPU seconds per 1,000 streamed tokens once started
(imports and start-up cancel out). The same runs give each client's output throughput,
median TTFT and median ITL, next to the server's own median token gap.

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

_OURS = """
import json, sys
from ansible_collections.bwtune.sglang.plugins.module_utils.bench_client import Workload, run_workload
port, n, c, inp, out = (int(x) for x in sys.argv[1:6])
w = Workload(input_len=inp, output_len=out, num_prompts=n, concurrency=c, warmup=1)
print(json.dumps(run_workload("127.0.0.1", port, w)["repetitions"][0]))
"""


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_measured(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    """(CPU seconds the process used, its stdout)."""
    before = child_cpu()
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    cpu = child_cpu() - before
    if out.returncode != 0:
        sys.exit(f"{argv[0]} {' '.join(argv[1:4])}...: exit {out.returncode}\n{out.stderr[-3000:]}")
    return cpu, out.stdout


def ours(port: int, n: int, a: argparse.Namespace) -> tuple[float, dict[str, Any]]:
    cpu, out = run_measured(
        [
            sys.executable,
            "-c",
            _OURS,
            str(port),
            str(n),
            str(a.concurrency),
            str(a.input_len),
            str(a.output_len),
        ]
    )
    return cpu, json.loads(out.strip().splitlines()[-1])


def theirs(port: int, n: int, a: argparse.Namespace) -> tuple[float, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "out.jsonl"
        argv = bench_serving_argv(
            f"http://127.0.0.1:{port}",
            input_len=a.input_len,
            output_len=a.output_len,
            num_prompts=n,
            concurrency=a.concurrency,
            output_file=result,
        )
        cpu, _ = run_measured(argv, dict(os.environ, **OFFLINE))
        return cpu, json.loads(result.read_text().strip().splitlines()[-1])


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

    def stop(self) -> float:
        """Stop; the median gap between the tokens it really sent to full-length streams."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats") as r:
            sends = json.loads(r.read())["sends"]
        self.proc.terminate()
        self.proc.wait()
        return median_gap_ms([s["times"] for s in sends if len(s["times"]) == self.output_len])


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

    def stop(self) -> float:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        sends = json.loads(self.log.read_text())["sends"]
        return median_gap_ms([t for t in sends if len(t) == self.output_len])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--server", choices=("standin", "sse"), default="standin")
    p.add_argument("--step-ms", type=float, default=8.0, help="standin: decode step (one token per stream)")
    p.add_argument("--itl-ms", type=float, default=2.0, help="sse: gap between tokens")
    p.add_argument("--ttft-ms", type=float, default=20.0, help="sse: time to the first token")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--num-prompts", type=int, default=256, help="the large run")
    p.add_argument("--small-prompts", type=int, default=32, help="the small run (start-up baseline)")
    p.add_argument("--json", help="also write the figures here")
    a = p.parse_args()
    ensure_bench_serving()
    with tempfile.TemporaryDirectory() as tmp:
        server = (Standin if a.server == "standin" else SseServer)(a, Path(tmp))
        try:
            rows: dict[str, Any] = {}
            for name, fn in (("bwtune", ours), ("bench_serving", theirs)):
                cpu_small, _ = fn(server.port, a.small_prompts, a)
                cpu_big, m = fn(server.port, a.num_prompts, a)
                tokens = (a.num_prompts - a.small_prompts) * a.output_len
                rows[name] = {
                    "cpu_s_per_1k_tokens": (cpu_big - cpu_small) / tokens * 1000,
                    "cpu_s_large_run": cpu_big,
                    "cpu_s_small_run": cpu_small,
                    "output_throughput": m["output_throughput"],
                    "median_ttft_ms": m["median_ttft_ms"],
                    "median_itl_ms": m["median_itl_ms"],
                    "mean_itl_ms": m["mean_itl_ms"],
                }
        finally:
            true_gap = server.stop()
    ratio = rows["bwtune"]["cpu_s_per_1k_tokens"] / rows["bench_serving"]["cpu_s_per_1k_tokens"]
    print(
        f"workload: /generate stream, {a.concurrency} concurrent, {a.input_len} in / {a.output_len} out; "
        f"server: {server.label} (median gap it really sent: {true_gap:.3f} ms)"
    )
    head = ("client", "CPU s/1k tok", "out tok/s", "med TTFT ms", "med ITL ms", "mean ITL")
    print("{:<14} {:>13} {:>10} {:>12} {:>11} {:>9}".format(*head))
    for name, r in rows.items():
        print(
            f"{name:<14} {r['cpu_s_per_1k_tokens']:>13.4f} {r['output_throughput']:>10.0f} "
            f"{r['median_ttft_ms']:>12.2f} {r['median_itl_ms']:>11.3f} {r['mean_itl_ms']:>9.3f}"
        )
    print(f"bwtune / bench_serving CPU per token: {ratio:.2f} (target <= 0.5)")
    if a.json:
        figures = {"args": vars(a), "server_median_gap_ms": true_gap, "clients": rows, "cpu_ratio": ratio}
        Path(a.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
