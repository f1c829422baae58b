"""Client CPU cost: bwtune's benchmark client vs `python -m sglang.bench_serving`.

Both clients run against the same local SGLang-shaped streaming server (a separate process,
tests/unit/sweep_parts/sse_server.py), at the same token rate, output length, concurrency and
streaming mode (native /generate, stream). Each client runs as its own process; its CPU time
(user + sys, from the kernel's child rusage) is measured for a large and a small run, and the
difference divided by the difference in streamed tokens gives CPU seconds per 1,000 streamed
tokens once started (imports and start-up cancel out). The same runs give each client's
output throughput, median TTFT and median ITL, next to the server's own median token gap.

    .venv/bin/python benchmarks/bench_client_overhead.py [--itl-ms 2] [--concurrency 32] ...

Needs build/bench-serving (tests/standin/make_bench_venv.sh, run here if missing).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH_VENV = ROOT / "build" / "bench-serving"
TOKENIZER = BENCH_VENV / "tokenizer"
SERVER = ROOT / "tests" / "unit" / "sweep_parts" / "sse_server.py"

_MAKE_TOKENIZER = """
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=32000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              special_tokens=["<s>", "</s>"])
tok.train_from_iterator((f"tok{i} word{i % 977} x{i % 31}" for i in range(40000)), trainer)
PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>").save_pretrained(sys.argv[1])
"""

_OURS = """
import json, sys
from ansible_collections.bwtune.sglang.plugins.module_utils.bench_client import Workload, run_workload
port, n, c, inp, out = (int(x) for x in sys.argv[1:6])
w = Workload(input_len=inp, output_len=out, num_prompts=n, concurrency=c, warmup=1)
print(json.dumps(run_workload("127.0.0.1", port, w)["repetitions"][0]))
"""


def ensure_bench_venv() -> None:
    """The bench_serving venv and a tiny tokenizer for it (both idempotent)."""
    subprocess.run(["bash", str(ROOT / "tests" / "standin" / "make_bench_venv.sh")], check=True)
    if not (TOKENIZER / "tokenizer.json").exists():
        subprocess.run(
            [str(BENCH_VENV / "bin" / "python"), "-c", _MAKE_TOKENIZER, str(TOKENIZER)], check=True
        )


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
        argv = [
            str(BENCH_VENV / "bin" / "python"), "-m", "sglang.bench_serving",
            "--backend", "sglang", "--base-url", f"http://127.0.0.1:{port}",
            "--dataset-name", "random-ids", "--random-input-len", str(a.input_len),
            "--random-output-len", str(a.output_len), "--random-range-ratio", "1",
            "--num-prompts", str(n), "--max-concurrency", str(a.concurrency), "--request-rate", "inf",
            "--tokenizer", str(TOKENIZER), "--disable-tqdm", "--warmup-requests", "1",
            "--output-file", str(result),
        ]  # fmt: skip
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        cpu, _ = run_measured(argv, env)
        return cpu, json.loads(result.read_text().strip().splitlines()[-1])


def server_median_gap_ms(port: int, output_len: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats") as r:
        sends = json.loads(r.read())["sends"]
    full = [s["times"] for s in sends if len(s["times"]) == output_len]
    gaps = [b - a for t in full for a, b in itertools.pairwise(t)]
    return statistics.median(gaps) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--itl-ms", type=float, default=2.0)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--num-prompts", type=int, default=256, help="the large run")
    p.add_argument("--small-prompts", type=int, default=32, help="the small run (start-up baseline)")
    p.add_argument("--json", help="also write the figures here")
    a = p.parse_args()
    ensure_bench_venv()
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", "0", "--itl-ms", str(a.itl_ms), "--ttft-ms", str(a.ttft_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        rows: dict[str, Any] = {}
        for name, fn in (("bwtune", ours), ("bench_serving", theirs)):
            cpu_small, _ = fn(port, a.small_prompts, a)
            cpu_big, m = fn(port, a.num_prompts, a)
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
        true_gap = server_median_gap_ms(port, a.output_len)
    finally:
        server.terminate()
        server.wait()
    ratio = rows["bwtune"]["cpu_s_per_1k_tokens"] / rows["bench_serving"]["cpu_s_per_1k_tokens"]
    print(
        f"workload: /generate stream, {a.concurrency} concurrent, {a.output_len} tokens each, "
        f"server {a.itl_ms:g} ms/token (median gap it really sent: {true_gap:.3f} ms)"
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
