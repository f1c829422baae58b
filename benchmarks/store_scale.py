"""The results store at scale: `bwtune import`, `bwtune runs` and `bwtune report` of one huge
run, each timed with its peak RSS (targets for 100,000 lines: import under 30 s and 500 MB,
runs under 2 s, report under 30 s; docs/benchmarks.md, "Results store at scale").

    .venv/bin/python benchmarks/store_scale.py [--lines 20000] [--keep DIR] [--in-process] [--repeat N]

It writes one run's results file of `--lines` lines (two hosts; 80% ok with two workloads of
five repetitions each, 12% failed with a 50-line log tail, 8% pruned or duplicate: about
10 KB a line, as the 988 MB file of 100,000 lines in issue 21), then runs each command in
its own process (the installed `bwtune` entry point, a fresh BWTUNE_HOME) and reads that
process's peak RSS from wait4() (the largest single process's) and, sampled from /proc every
0.2 s, the peak of all its processes together (a big import's worker processes). The default
(5,000 lines) takes about a minute on the 2-core dev VM.

`--in-process` times only the import, as bwtune.store.import_results_file in a process of its
own (this script again): no CLI start-up, and nothing but bwtune.store and orjson needed, for a
host without the CLI's other dependencies. `--repeat N` runs the steps N times.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RUN_ID = "r-scale"
WORKLOADS = ("chat-1k", "long-8k", "screen")
REPETITIONS = 5
METRICS = (
    "request_throughput", "output_throughput", "total_throughput", "mean_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "output_tok_s_per_request",
    "completed", "failed",
)  # fmt: skip
FAILURE_CLASSES = ("oom", "crashed", "startup-timeout", "invalid-args", "wrong-output")
MODEL = "/models/Qwen3.5-397B-A17B-NVFP4"


def _config_id(flags: dict[str, Any]) -> str:
    return "c" + hashlib.sha256(json.dumps(flags, sort_keys=True).encode()).hexdigest()[:10]


def _metrics(rng: random.Random, speed: float, workloads: tuple[str, ...]) -> dict[str, Any]:
    out = {}
    for workload in workloads:
        reps = []
        for _ in range(REPETITIONS):
            tput = 1450.0 * speed * rng.gauss(1.0, 0.02)
            tpot = 21.0 / speed * rng.gauss(1.0, 0.015)
            row = {m: round(rng.uniform(1, 3000), 4) for m in METRICS}
            row.update(output_throughput=round(tput, 3), mean_tpot_ms=round(tpot, 3),
                       output_tok_s_per_request=round(1000.0 / tpot, 3), completed=64, failed=0)  # fmt: skip
            reps.append(row)
        values = {m: round(statistics.fmean(r[m] for r in reps), 4) for m in METRICS}
        out[workload] = {
            "n": REPETITIONS,
            "values": values,
            "ci95": {m: [round(values[m] * 0.98, 4), round(values[m] * 1.02, 4)] for m in METRICS},
            "cv": {m: 0.01 for m in METRICS},
            "repetitions": reps,
        }
    return out


def lines(count: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """One run's results lines, generated one at a time (never all in memory)."""
    rng = random.Random(seed)
    for index in range(count):
        point = {
            "moe-runner-backend": ("flashinfer_cutlass", "flashinfer_trtllm", "triton")[index % 3],
            "cuda-graph-max-bs": 8 * (1 + index % 64),
            "chunked-prefill-size": 1024 * (1 + index // 192),
        }
        flags = {"model-path": MODEL, "tp-size": 8, "trust-remote-code": True, **point}
        roll = index % 25
        status = (
            "ok"
            if roll < 20
            else FAILURE_CLASSES[index % 5]
            if roll < 23
            else ("pruned", "duplicate")[roll % 2]
        )
        metrics: dict[str, Any] = {}
        failure = None
        speed = rng.uniform(0.6, 1.3)
        if status == "ok":
            metrics = _metrics(rng, speed, WORKLOADS)
        elif status not in ("pruned", "duplicate"):
            if status == "wrong-output":
                metrics = _metrics(rng, speed, WORKLOADS[:1])
            tail = [
                f"[2026-11-30 10:00:{n:02d}] TP{n % 8} INFO scheduler step {n} batch {index}"
                for n in range(49)
            ]
            failure = {"class": status, "message": f"{status} in config {index}", "log_tail": [*tail, status]}
        else:
            failure = {"class": status, "message": f"{status}: plan decision", "log_tail": []}
        minute, second = divmod(index % 3600, 60)
        yield {
            "schema": 1,
            "run_id": RUN_ID,
            "host": ("gpu-a", "gpu-b")[index % 2],
            "config_id": _config_id(flags),
            "point": point,
            "flags": flags,
            "argv": [w for name, value in flags.items() for w in (f"--{name}", str(value))],
            "launch_command": ["/opt/bwtune/stacks/current/bin/python", "-m", "sglang.launch_server"],
            "status": status,
            "simulated": True,
            "stack_fingerprint": "sha256:5f1c0a9e3b7d",
            "gpu": "sm120",
            "sglang_version": "0.5.23",
            "started_at": f"2026-11-30T10:{minute:02d}:{second:02d}+00:00",
            "finished_at": f"2026-11-30T11:{minute:02d}:{second:02d}+00:00",
            "timings": {"startup_s": 41.2, "gate_s": 3.1, "bench_s": 96.4 if metrics else 0.0, "stop_s": 4.0},
            "release": None if status in ("pruned", "duplicate") else {"forced": False, "gpu": "released"},
            "metrics": metrics,
            "accept_length": None,
            "screened_out": False,
            "duplicate_of": None,
            "failure": failure,
            "reasons": [],
        }


def write_file(path: Path, count: int) -> int:
    size = 0
    with path.open("w", encoding="utf-8") as handle:
        for line in lines(count):
            text = json.dumps(line) + "\n"
            size += len(text)
            handle.write(text)
    return size


def _count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def _tree_rss_kib(pid: int) -> int:
    """The resident memory of a process and all its descendants (KiB), 0 once it is gone."""
    total = 0
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total = int(line.split()[1])
    except OSError:
        return 0
    return total + sum(_tree_rss_kib(int(child)) for child in children)


def _alive(pid: int) -> bool:
    """Whether a child runs (not yet a zombie); never reaps it (wait4 does)."""
    try:
        state = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                     if line.startswith("State:"))  # fmt: skip
    except (OSError, StopIteration):
        return False
    return "Z" not in state.split()[1]


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, float, int, str]:
    """(wall seconds, CPU seconds (user + system, its waited-for worker processes included),
    peak RSS in MiB of the largest process, peak RSS in MiB of all its processes together
    (sampled every 0.2 s), exit code, the last line of output) of one process. On a shared
    machine the CPU seconds are the steadier figure."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        peak = [0]

        def sample() -> None:
            while _alive(child.pid):
                peak[0] = max(peak[0], _tree_rss_kib(child.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        sampler.join()
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace").strip().splitlines()
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024.0, peak[0] / 1024.0, child.returncode, text[-1] if text else ""


def _import_child(results: str, db: str) -> int:
    """--in-process's import: bwtune.store.import_results_file, as `bwtune import` calls it."""
    from bwtune.store import connect, import_results_file  # only this mode needs it

    summary = import_results_file(connect(db), results)
    print(f"imported {summary.total} results: {summary.added} added, {summary.unchanged} unchanged")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=5000, help="results lines (default 5000)")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the results file, database and report here (a kept file of --lines lines is used again)",
    )
    parser.add_argument(
        "--cli",
        help="how to run bwtune (default: the bwtune beside this Python), e.g. "
        "\"python3 -c 'import sys; from bwtune.cli import main; sys.exit(main())'\" on a machine without it",
    )
    parser.add_argument("--in-process", action="store_true",
                        help="time only the import, in a process of its own without the CLI")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="run the steps this many times")
    parser.add_argument("--import-child", nargs=2, metavar=("RESULTS", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.import_child:
        return _import_child(*args.import_child)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bwtune-store-scale."))
    work.mkdir(parents=True, exist_ok=True)
    bwtune = shutil.which("bwtune", path=str(Path(sys.executable).parent)) or "bwtune"
    prefix = shlex.split(args.cli) if args.cli else [bwtune]
    env = {**os.environ, "BWTUNE_HOME": str(work / "home")}
    env.pop("BWTUNE_DB", None)
    try:
        results = work / "results.jsonl"
        shutil.rmtree(work / "home", ignore_errors=True)  # every command starts from no database
        started = time.perf_counter()
        if args.keep is not None and results.is_file() and _count_lines(results) == args.lines:
            size, how = results.stat().st_size, "kept from an earlier run"  # the same generator's
        else:
            size, how = write_file(results, args.lines), f"written in {time.perf_counter() - started:.1f} s"
        print(f"{args.lines:,} lines, {size / 1e6:,.0f} MB ({size / args.lines / 1e3:.1f} KB a line), {how}")
        db = work / "home" / "results.db"
        steps = [
            ("import", [*prefix, "import", str(results)]),
            ("runs", [*prefix, "runs"]),
            ("startup", [*prefix, "--version"]),  # the interpreter and CLI start-up in the figures
            ("report", [*prefix, "report", RUN_ID]),
        ]
        if args.in_process:
            steps = [("import", [sys.executable, __file__, "--import-child", str(results), str(db)])]
        failed = False
        for _ in range(args.repeat):
            shutil.rmtree(work / "home", ignore_errors=True)
            (work / "home").mkdir(parents=True)
            for name, argv in steps:
                wall, cpu, rss, tree, code, last = measure(argv, env)
                failed |= code != 0
                print(f"{name:7s} {wall:8.2f} s wall {cpu:8.2f} s CPU  peak RSS {rss:7.1f} MiB "
                      f"(all processes {tree:7.1f} MiB)  exit {code}  | {last[:80]}", flush=True)  # fmt: skip
        html = work / "home" / "runs" / RUN_ID / "report.html"
        print(f"database {db.stat().st_size / 1e6:,.0f} MB"
              + (f"; report.html {html.stat().st_size / 1e3:,.0f} KB" if html.is_file() else ""))  # fmt: skip
        return 1 if failed else 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
