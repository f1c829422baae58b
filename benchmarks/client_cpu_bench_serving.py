"""Run `python -m sglang.bench_serving` in-process and count its CPU only while it benchmarks.

    build/bench-serving/bin/python benchmarks/client_cpu_bench_serving.py RESULT.json \
        -m sglang.bench_serving --backend sglang ...   (bench_serving_env.bench_serving_argv)

The arguments after `-m sglang.bench_serving` go through bench_serving's own CLI parser
(`cli_main`), so the run is exactly the command's. Three of its module functions are wrapped
to read this process's CPU (user + sys, all threads: getrusage(RUSAGE_SELF)) at:
  - `benchmark()` entry and exit: the whole benchmark call (warmup, 1 s pause, the run,
    /server_info, metrics); imports, tokenizer and dataset are before it;
  - `get_request()` (called right when the measured run starts sending) and
    `calculate_metrics()` entry (after the last response): the streaming window.
Writes those figures, the tokens it reported and its result line to RESULT.json.
"""

from __future__ import annotations

import importlib
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
    if sys.argv[2:4] != ["-m", "sglang.bench_serving"]:
        sys.exit(f"argv[2:4] is {sys.argv[2:4]}, expected ['-m', 'sglang.bench_serving']")
    import_start = cpu()
    importlib.import_module("sglang.bench_serving")  # the deprecated alias the CLI runs
    serving: Any = importlib.import_module("sglang.benchmark.serving")
    marks: dict[str, tuple[float, float]] = {"import_start": import_start, "imported": cpu()}
    result: dict[str, Any] = {}

    benchmark = serving.benchmark
    get_request = serving.get_request
    calculate_metrics = serving.calculate_metrics

    async def timed_benchmark(*args: Any, **kwargs: Any) -> Any:
        marks["benchmark_start"] = cpu()
        res = await benchmark(*args, **kwargs)
        marks["benchmark_end"] = cpu()
        result.update(res)
        return res

    def timed_get_request(*args: Any, **kwargs: Any) -> Any:
        marks["stream_start"] = cpu()
        return get_request(*args, **kwargs)

    def timed_calculate_metrics(*args: Any, **kwargs: Any) -> Any:
        marks["stream_end"] = cpu()
        return calculate_metrics(*args, **kwargs)

    serving.benchmark = timed_benchmark
    serving.get_request = timed_get_request
    serving.calculate_metrics = timed_calculate_metrics
    sys.argv = ["bench_serving", *sys.argv[4:]]
    serving.cli_main()
    if "stream_end" not in marks or not result:
        sys.exit("bench_serving returned without running its benchmark")
    tokens = int(result["total_output_tokens"])
    figures = {
        "client": "bench_serving",
        "tokens": tokens,
        "completed": result["completed"],
        "stream_cpu_s": marks["stream_end"][0] - marks["stream_start"][0],
        "benchmark_cpu_s": marks["benchmark_end"][0] - marks["benchmark_start"][0],
        "children_cpu_s": marks["benchmark_end"][1] - marks["benchmark_start"][1],
        "import_cpu_s": marks["imported"][0] - marks["import_start"][0],
        "metrics": {
            k: result[k] for k in ("output_throughput", "median_ttft_ms", "median_itl_ms", "mean_itl_ms")
        },
    }
    out_path.write_text(json.dumps(figures))


if __name__ == "__main__":
    main()
