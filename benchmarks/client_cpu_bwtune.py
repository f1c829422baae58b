"""Run bwtune's benchmark client in-process and count its CPU only while it benchmarks.

    .venv/bin/python benchmarks/client_cpu_bwtune.py RESULT.json PORT PROMPTS CONCURRENCY IN OUT

The same measurement as client_cpu_bench_serving.py: this process's CPU (getrusage
RUSAGE_SELF, user + sys) around the whole `BenchClient.run()` (warmup, the run, /server_info,
metrics) and around the measured repetition's `_drive()` (the streaming window: prompts are
already built, as bench_serving's dataset is before its run starts).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
from pathlib import Path
from typing import Any


def cpu() -> tuple[float, float]:
    """(this process's CPU seconds, its waited-for children's)."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


def main() -> None:
    out_path = Path(sys.argv[1])
    port, prompts, concurrency, input_len, output_len = (int(x) for x in sys.argv[2:7])
    import_start = cpu()
    from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_client import (
        BenchClient,
        Workload,
    )

    imported = cpu()
    drives: list[tuple[tuple[float, float], tuple[float, float]]] = []
    drive = BenchClient._drive

    async def timed_drive(self: BenchClient, *args: Any, **kwargs: Any) -> Any:
        start = cpu()
        res = await drive(self, *args, **kwargs)
        drives.append((start, cpu()))
        return res

    BenchClient._drive = timed_drive  # type: ignore[method-assign]
    w = Workload(
        input_len=input_len, output_len=output_len, num_prompts=prompts, concurrency=concurrency, warmup=1
    )

    async def run() -> tuple[dict[str, Any], tuple[float, float], tuple[float, float]]:
        client = BenchClient("127.0.0.1", port)
        try:
            start = cpu()
            res = await client.run(w)
            return res, start, cpu()
        finally:
            client.close()

    res, start, end = asyncio.run(run())
    rep = res["repetitions"][0]
    stream_start, stream_end = drives[-1]  # the first _drive is the warmup
    figures = {
        "client": "bwtune",
        "tokens": rep["total_output_tokens"],
        "completed": rep["completed"],
        "stream_cpu_s": stream_end[0] - stream_start[0],
        "benchmark_cpu_s": end[0] - start[0],
        "children_cpu_s": end[1] - start[1],
        "import_cpu_s": imported[0] - import_start[0],
        "metrics": {
            k: rep[k] for k in ("output_throughput", "median_ttft_ms", "median_itl_ms", "mean_itl_ms")
        },
    }
    out_path.write_text(json.dumps(figures))


if __name__ == "__main__":
    main()
