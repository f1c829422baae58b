"""A generator of realistic node results lines (docs/architecture.md, results file contract).

Two hosts, two workloads, three repetitions, several ok configs and one config per failure
class, all from the stand-in (simulated: true) unless asked otherwise. Numbers come from a
seeded RNG so every test sees the same run.
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
from pathlib import Path
from typing import Any

MODEL = "/models/Qwen3.5-397B-A17B-NVFP4"
WORKLOADS = ("chat-1k", "long-8k")
REPETITIONS = 3
FINGERPRINT = "sha256:5f1c0a9e3b7d"
LAUNCH_COMMAND = ["/opt/bwtune/stacks/current/bin/python", "-m", "sglang.launch_server"]
FAILURES = {
    "pruned": "rule fp8-kv-needs-sm90: --kv-cache-dtype fp8_e5m2 is not supported on sm120",
    "duplicate": "same normalized flags as c5d41402abc",
    "invalid-args": "sglang.launch_server: error: argument --moe-runner-backend: invalid choice: 'cutlas'",
    "unsupported-hardware": "RuntimeError: FlashInfer FP4 GEMM has no kernel for sm_120",
    "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB",
    "startup-timeout": "server did not answer /health within 900 s",
    "crashed": "server exited with signal 11 (SIGSEGV) during workload chat-1k",
    "wrong-output": "correctness gate: 3/8 answers wrong (expected '42', got '4 2 4 2 4 2')",
}
# A launch's cold start (results_contract.COLD_START_SECONDS): a failed start got as far as
# its class says; crashed and wrong-output launches were ready and answered (as ok ones).
_READY = {"process_to_listen_s": 0.5, "to_health_s": 38.9, "to_ready_s": 41.2, "to_first_token_s": 41.9}
_COLD_STARTS: dict[str, dict[str, Any] | None] = {
    "pruned": None,  # never launched
    "duplicate": None,
    "ok": {**_READY, "failed_after_s": None, "reached": "first_token"},
    "invalid-args": {"process_to_listen_s": None, "to_health_s": None, "to_ready_s": None,
                     "to_first_token_s": None, "failed_after_s": 1.6, "reached": "started"},
    "oom": {"process_to_listen_s": 0.5, "to_health_s": None, "to_ready_s": None,
            "to_first_token_s": None, "failed_after_s": 33.4, "reached": "listening"},
    "startup-timeout": {"process_to_listen_s": 0.5, "to_health_s": None, "to_ready_s": None,
                        "to_first_token_s": None, "failed_after_s": 900.0, "reached": "listening"},
}  # fmt: skip
_COLD_STARTS["unsupported-hardware"] = _COLD_STARTS["oom"]
# Where in the pipeline each failure happened: before launch (no metrics) or after some work.
_FAILED_AFTER_BENCH = {"wrong-output"}


def config_id(flags: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(flags, sort_keys=True).encode()).hexdigest()
    return "c" + digest[:10]


def argv_for(flags: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for name, value in flags.items():
        if value is True:
            argv.append(f"--{name}")
        elif value is False or value is None:
            continue
        elif isinstance(value, dict | list):
            argv += [f"--{name}", json.dumps(value)]
        else:
            argv += [f"--{name}", str(value)]
    return argv


def _ci95(values: list[float]) -> list[float]:
    # t(0.975, df=2) = 4.303 for three repetitions.
    mean = statistics.fmean(values)
    half = 4.303 * statistics.stdev(values) / len(values) ** 0.5
    return [round(mean - half, 3), round(mean + half, 3)]


def _metrics(
    rng: random.Random, speed: float, workloads: tuple[str, ...], batch: float = 1.0
) -> dict[str, Any]:
    """Bigger batches raise total throughput but slow each request down (the Pareto trade)."""
    out = {}
    for workload in workloads:
        long_context = workload.startswith("long")
        reps = []
        for _ in range(REPETITIONS):
            jitter = rng.gauss(1.0, 0.02)
            tput = (620.0 if long_context else 1450.0) * speed * batch * jitter
            tpot = (38.0 if long_context else 21.0) / speed * batch**0.7 / rng.gauss(1.0, 0.015)
            ttft = (2400.0 if long_context else 310.0) / speed * rng.gauss(1.0, 0.04)
            reps.append(
                {
                    "request_throughput": round(tput / (512 if long_context else 256), 4),
                    "output_throughput": round(tput, 3),
                    "total_throughput": round(tput * (9 if long_context else 5), 3),
                    "mean_ttft_ms": round(ttft, 2),
                    "p99_ttft_ms": round(ttft * 2.1, 2),
                    "mean_tpot_ms": round(tpot, 3),
                    "p99_tpot_ms": round(tpot * 1.6, 3),
                    "output_tok_s_per_request": round(1000.0 / tpot, 3),
                    "completed": 64,
                    "failed": 0,
                }
            )
        names = list(reps[0])
        values = {m: round(statistics.fmean(r[m] for r in reps), 4) for m in names}
        out[workload] = {
            "n": REPETITIONS,
            "values": values,
            "ci95": {m: _ci95([r[m] for r in reps]) for m in names},
            "cv": {
                m: round(statistics.stdev([r[m] for r in reps]) / values[m], 5) if values[m] else 0.0
                for m in names
            },
            "repetitions": reps,
        }
    return out


def _line(
    *,
    run_id: str,
    host: str,
    point: dict[str, Any],
    status: str,
    rng: random.Random,
    speed: float,
    simulated: bool,
    index: int,
    batch: float = 1.0,
) -> dict[str, Any]:
    flags = {"model-path": MODEL, "tp-size": 8, "trust-remote-code": True, **point}
    failure = None
    metrics: dict[str, Any] = {}
    if status == "ok":
        metrics = _metrics(rng, speed, WORKLOADS, batch)
    else:
        if status in _FAILED_AFTER_BENCH:
            metrics = _metrics(rng, speed * 1.4, WORKLOADS[:1])  # fast but wrong
        tail = [f"[2026-11-30 10:{index:02d}:{n:02d}] TP{n % 8} INFO scheduler step {n}" for n in range(48)]
        tail += ["Traceback (most recent call last):", FAILURES[status]]
        failure = {"class": status, "message": FAILURES[status], "log_tail": tail[-50:]}
    started = f"2026-11-30T10:{index:02d}:00+00:00"
    return {
        "schema": 1,
        "run_id": run_id,
        "host": host,
        "config_id": config_id(flags),
        "point": point,
        "flags": flags,
        "argv": argv_for(flags),
        "launch_command": LAUNCH_COMMAND,
        "status": status,
        "simulated": simulated,
        "stack_fingerprint": FINGERPRINT,
        "gpu": "sm120",
        "sglang_version": "0.5.23",
        "started_at": started,
        "finished_at": f"2026-11-30T10:{index:02d}:50+00:00",
        "timings": {"startup_s": 41.2, "gate_s": 3.1, "bench_s": 0.0 if not metrics else 96.4, "stop_s": 4.0},
        "release": None if status in ("pruned", "duplicate") else {"forced": False, "gpu": "released"},
        "cold_start": _COLD_STARTS.get(status, _COLD_STARTS["ok"]),
        "metrics": metrics,
        "accept_length": None,
        "screened_out": False,
        "duplicate_of": "c5d41402abc" if status == "duplicate" else None,
        "failure": failure,
        "reasons": [{"rule": "r", "kind": "hardware", "message": FAILURES[status], "source": "rules.py"}]
        if status in ("pruned", "unsupported-hardware")
        else [],
    }


# (varying flags, speed of the kernels, batching factor).
OK_POINTS: tuple[tuple[dict[str, Any], float, float], ...] = (
    ({"moe-runner-backend": "flashinfer_cutlass", "cuda-graph-max-bs": 128}, 1.00, 1.0),
    ({"moe-runner-backend": "flashinfer_cutlass", "cuda-graph-max-bs": 256}, 1.00, 1.12),
    ({"moe-runner-backend": "triton", "cuda-graph-max-bs": 256}, 0.80, 1.1),
    (
        {"moe-runner-backend": "flashinfer_trtllm", "cuda-graph-max-bs": 256, "enable-dp-attention": True},
        1.0,
        1.22,
    ),
    ({"moe-runner-backend": "flashinfer_trtllm", "cuda-graph-max-bs": 64}, 1.08, 0.8),
)


def sample_results(
    run_id: str = "r20261130-demo", *, simulated: bool = True, seed: int = 7, speed_scale: float = 1.0
) -> list[dict[str, Any]]:
    """All lines of one run: host gpu-a has every ok config and every failure class; gpu-b
    re-measures two ok configs (merging across hosts)."""
    rng = random.Random(seed)
    lines = []
    index = 0
    for point, speed, batch in OK_POINTS:
        lines.append(
            _line(
                run_id=run_id,
                host="gpu-a",
                point=point,
                status="ok",
                rng=rng,
                speed=speed * speed_scale,
                batch=batch,
                simulated=simulated,
                index=index,
            )
        )
        index += 1
    for n, status in enumerate(FAILURES):
        point = {
            "moe-runner-backend": "triton",
            "cuda-graph-max-bs": 32 * (n + 1),
            "chunked-prefill-size": 4096,
        }
        lines.append(
            _line(
                run_id=run_id,
                host="gpu-a",
                point=point,
                status=status,
                rng=rng,
                speed=speed_scale,
                simulated=simulated,
                index=index,
            )
        )
        index += 1
    for point, speed, batch in OK_POINTS[:2]:
        lines.append(
            _line(
                run_id=run_id,
                host="gpu-b",
                point=point,
                status="ok",
                rng=rng,
                speed=speed * 0.97 * speed_scale,
                batch=batch,
                simulated=simulated,
                index=index,
            )
        )
        index += 1
    return lines


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path
