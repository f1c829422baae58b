"""A results store for the recipe tests, made with the store's own import path."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bwtune import store

RUN = "r20261130-demo"
GPU_FACTS = {
    "gpus": "8 x NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "count": 8,
    "sm": "sm120",
    "memory_mib": 97887,
    "driver": "580.95.05",
    "cuda": "13.0",
    "interconnect": "pcie",
}
STACK = {
    "fingerprint": "sha256:5f1c0a9e3b7d",
    "torch": "2.12.0.dev20260307+cu130",
    "cuda": "13.0",
    "sglang": "0.5.23",
    "sglang_commit": "a" * 40,
    "sgl_kernel": "0.4.1",
    "sgl_kernel_build": "sm120a; fp4 ops: cutlass_scaled_fp4_mm",
    "flashinfer": "0.7.2",
    "driver": "580.95.05",
}


def make_store(path: Path, lines: list[dict]) -> sqlite3.Connection:
    conn = store.connect(path)
    store.record_run(
        conn, RUN, objective={"workload": "chat-1k", "metric": "output_throughput", "goal": "max"}
    )
    store.import_results(conn, lines)
    store.record_host_facts(conn, RUN, "gpu-a", gpu="sm120", gpu_facts=GPU_FACTS)
    return conn
