"""How much the stand-in's own overhead distorts its simulated timing under load.

Starts one stand-in pinned to one core (taskset -c 0) with a fast profile (64 concurrent
streams at > 5,000 tokens/s), drives it from a raw-socket asyncio client pinned to the
other core, and compares the measured output throughput with the profile's prediction
(the same batch model on a virtual clock, times the launch's own speed factor).

    .venv/bin/python benchmarks/standin_streaming.py [--endpoint generate|completions]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from bwtune.standin.batch import predict_output_throughput
from bwtune.standin.performance import ConfigPerformance
from bwtune.standin.profile import DEFAULT_PROFILE, PROFILES_DIR, load_profile

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
FLAGS = ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass", "--tp-size", "8"]


def fast_profile(path: Path) -> None:
    data = yaml.safe_load((PROFILES_DIR / f"{DEFAULT_PROFILE}.yml").read_text())
    # 64 streams / 10 ms per step = 6,400 tokens/s (x0.97 for the auto FP4 GEMM adjustment)
    data["decode"]["baseline"]["step_ms"] = {1: 5.0, 64: 10.0, 128: 16.0}
    data["name"] = "bench-fast"
    path.write_text(yaml.safe_dump(data))


async def worker(port: int, endpoint: str, requests: int, input_len: int, output_len: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if endpoint == "generate":
        path = "/generate"
        payload = {"input_ids": [7] * input_len, "stream": True,
                   "sampling_params": {"max_new_tokens": output_len, "ignore_eos": True}}  # fmt: skip
    else:
        path = "/v1/completions"
        payload = {
            "model": "m",
            "prompt": [7] * input_len,
            "max_tokens": output_len,
            "ignore_eos": True,
            "stream": True,
        }
    body = json.dumps(payload).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    chunks = 0
    for _ in range(requests):
        writer.write(head.encode() + body)
        await reader.readuntil(b"\r\n\r\n")
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            await reader.readexactly(size + 2)
            chunks += 1
    writer.close()
    return chunks


async def drive(port: int, endpoint: str, concurrency: int, per_worker: int, input_len: int, output_len: int):
    start = time.perf_counter()
    chunks = await asyncio.gather(
        *(worker(port, endpoint, per_worker, input_len, output_len) for _ in range(concurrency))
    )
    return time.perf_counter() - start, sum(chunks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", choices=("generate", "completions"), default="generate")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests-per-stream", type=int, default=4)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=512)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        profile_path = Path(tmp) / "fast.yml"
        fast_profile(profile_path)
        profile = load_profile(str(profile_path))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "BWTUNE_STANDIN_PROFILE": str(profile_path), "BWTUNE_STANDIN_STARTUP_SCALE": "0",
               "BWTUNE_STANDIN_STATE_DIR": tmp}  # fmt: skip
        argv = ["taskset", "-c", "0", sys.executable, "-m", "bwtune.standin", "--model-path", str(MODEL),
                "--port", str(port), "--max-running-requests", str(opts.concurrency), *FLAGS]  # fmt: skip
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(200):
                try:
                    if urllib.request.urlopen(url + "/health", timeout=1).status == 200:
                        break
                except OSError:
                    time.sleep(0.05)
            os.sched_setaffinity(0, {1})
            before = time.process_time()
            cpu_before = _cpu_seconds(proc.pid)
            wall, chunks = asyncio.run(
                drive(
                    port,
                    opts.endpoint,
                    opts.concurrency,
                    opts.requests_per_stream,
                    opts.input_len,
                    opts.output_len,
                )
            )
            server_cpu = _cpu_seconds(proc.pid) - cpu_before
            client_cpu = time.process_time() - before
            info = json.loads(urllib.request.urlopen(url + "/server_info").read())
        finally:
            proc.terminate()
            proc.wait(10)
    flags = {k.lstrip("-"): v for k, v in zip(FLAGS[::2], FLAGS[1::2], strict=True)}
    perf = ConfigPerformance.for_flags(profile, flags)
    total = opts.concurrency * opts.requests_per_stream
    factor = info["standin"]["launch_speed_factor"]
    predicted = (
        predict_output_throughput(
            perf, opts.concurrency, opts.input_len, opts.output_len, total, opts.concurrency
        )
        / factor
    )
    measured = total * opts.output_len / wall
    print(f"endpoint              /{opts.endpoint} (stream)")
    print(
        f"streams               {opts.concurrency} x {opts.requests_per_stream} requests"
        f" x {opts.output_len} tokens"
    )
    print(f"SSE chunks received   {chunks}")
    print(f"measured output tok/s {measured:,.0f}")
    print(f"predicted output tok/s {predicted:,.0f} (profile, launch factor {factor:.4f})")
    print(
        f"distortion            {100 * (predicted - measured) / predicted:+.2f}%"
        " (positive = slower than simulated)"
    )
    print(
        f"server CPU            {server_cpu:.2f} s for {wall:.2f} s wall"
        f" ({100 * server_cpu / wall:.0f}% of its one core)"
    )
    print(f"client CPU            {client_cpu:.2f} s")
    print(
        f"server step lag       mean {info['standin']['timing_lag_ms_mean']:.3f} ms,"
        f" max {info['standin']['timing_lag_ms_max']:.2f} ms"
    )
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    sys.exit(main())
