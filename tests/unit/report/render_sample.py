"""Render the sample run's report (used by the tests and to refresh docs/report-screenshot.png).

.venv/bin/python tests/unit/report/render_sample.py OUT_DIR [--screenshot docs/report-screenshot.png]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "db"))

from sample_results import FINGERPRINT, sample_results

from bwtune import results_db
from bwtune.report import ReportData, write_report

RUN_ID = "r20261130-demo"
MATRIX = {
    "name": "qwen35-397b-nvfp4-sm120",
    "objective": {"workload": "chat-1k", "metric": "output_throughput", "goal": "max"},
    "workloads": ["chat-1k", "long-8k"],
    "axes": {
        "moe-runner-backend": ["flashinfer_cutlass", "triton", "flashinfer_trtllm"],
        "cuda-graph-max-bs": [64, 128, 256],
        "enable-dp-attention": [False, True],
        "chunked-prefill-size": [4096],
    },
}
PLAN_SUMMARY = {"points": 16, "valid": 14, "pruned": 1, "duplicate": 1, "launches": 12}
GPU_FACTS = {"count": 8, "name": "NVIDIA RTX PRO 6000 Blackwell", "memory_mib": 97887, "driver": "580.95"}
STACK = {"sglang_version": "0.5.23", "torch": "2.9.1+cu130", "flashinfer": "0.5.3", "cuda": "13.0"}


def build_sample_db(path: Path, *, simulated: bool = True) -> sqlite3.Connection:
    conn = results_db.connect(path)
    results_db.import_results(conn, sample_results(RUN_ID, simulated=simulated))
    results_db.record_run(conn, RUN_ID, matrix=MATRIX, plan_summary=PLAN_SUMMARY)
    for host in ("gpu-a", "gpu-b"):
        results_db.record_host_facts(
            conn, RUN_ID, host, gpu_facts=GPU_FACTS, stack_fingerprint=FINGERPRINT, stack=STACK
        )
    return conn


def render(out_dir: Path, *, simulated: bool = True) -> tuple[Path, Path, ReportData]:
    out_dir.mkdir(parents=True, exist_ok=True)
    conn = build_sample_db(out_dir / "results.db", simulated=simulated)
    html, md = out_dir / "report.html", out_dir / "report.md"
    data = write_report(conn, RUN_ID, html_path=html, md_path=md)
    conn.close()
    return html, md, data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--screenshot", type=Path)
    args = parser.parse_args()
    html, md, _ = render(args.out_dir)
    print(html, md)
    if args.screenshot:
        from headless import screenshot

        print(screenshot(html, args.screenshot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
