"""Fleet sweep wall time: one grid on 1 local stand-in host against the same grid shared
among 2 and 4 (issue 25, docs/fleet.md).

Every run is `bwtune sweep --strategy grid` in a subprocess, in the same invocation of this
script, on inventories of local stand-in hosts (ansible_connection local, each host its own
results folder, so its own node lock, and its own ports), with a fresh BWTUNE_HOME each, so no
earlier run prices the launches (the plan's estimate: every launch costs alike). The matrix is
the demo's, its axes widened to --launches launches, one short workload. The stand-in's start-up
is scaled (BWTUNE_STANDIN_STARTUP_SCALE, default 0.05) so each launch spends seconds waiting as a
real server spends minutes: on this 2-core machine the hosts' servers mostly wait, as real
nodes' GPUs would work, while ansible's own per-host work competes for the cores.

    .venv/bin/python benchmarks/fleet_sweep.py [--hosts 1 2 4] [--launches 8] [--scale 0.05]

Prints each run's wall time, launches per host and the ratio to the 1-host run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "examples" / "models" / "qwen35-397b-a17b-nvfp4"
# SM120-valid values of the demo's axes (none pruned): 2 x 2 x 2 = 8 launches at most.
AXES = {
    "moe-runner-backend": ["flashinfer_cutlass", "marlin"],
    "fp4-gemm-backend": ["flashinfer_cutlass", "flashinfer_cudnn"],
    "speculative": ["none", "mtp3"],  # the demo's bundle axis
}


def matrix(folder: Path, launches: int) -> Path:
    data: dict[str, Any] = yaml.safe_load((REPO / "examples" / "demo.yml").read_text())
    model = folder / "model"
    shutil.copytree(MODEL, model)
    data["model"]["path"] = str(model)
    axes: dict[str, list[Any]] = {}
    total = 1
    for axis, values in AXES.items():
        take = values[: max(1, min(len(values), launches // total))]
        axes[axis] = take
        total *= len(take)
    data["axes"] = axes
    data.pop("exclude", None)
    data["workloads"] = [data["workloads"][0]]
    path = folder / "matrix.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def inventory(folder: Path, hosts: int) -> Path:
    data = {
        "all": {
            "hosts": {
                f"standin-{n}": {
                    "sweep_results_dir": str(folder / "nodes" / f"standin-{n}"),
                    "sweep_port": 31000 + 1000 * n,
                }
                for n in range(1, hosts + 1)
            },
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                "bwtune_simulated": True,
                "sweep_launch_command": ["{{ ansible_playbook_python }}", "-m", "bwtune.standin"],
                "sweep_env": {"BWTUNE_STANDIN_STARTUP_SCALE": os.environ["BWTUNE_STANDIN_STARTUP_SCALE"]},
            },
        }
    }
    path = folder / f"hosts-{hosts}.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def sweep(folder: Path, hosts: int, matrix_path: Path) -> dict[str, Any]:
    run_folder = folder / f"run-{hosts}"
    run_folder.mkdir()
    env = {**os.environ, "BWTUNE_HOME": str(run_folder / "home")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    argv = [sys.executable, "-m", "bwtune.cli", "sweep", "-i", str(inventory(run_folder, hosts))]
    argv += ["-m", str(matrix_path), "--strategy", "grid", "--json", "--quiet"]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{hosts} host(s): bwtune sweep exited {done.returncode}:\n{done.stderr}")
    output = json.loads(done.stdout)
    launched = [r for r in output["results"] if r["status"] not in ("pruned", "duplicate")]
    twice = [c for c, n in Counter(r["id"] for r in launched).items() if n > 1]
    if twice:
        raise SystemExit(f"{hosts} host(s): configs measured twice: {twice}")
    return {
        "hosts": hosts,
        "wall_s": wall,
        "launches": len(launched),
        "per_host": Counter(r["host"] for r in launched),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--launches", type=int, default=8)
    parser.add_argument("--scale", default="0.05", help="BWTUNE_STANDIN_STARTUP_SCALE for every run")
    args = parser.parse_args()
    os.environ["BWTUNE_STANDIN_STARTUP_SCALE"] = args.scale
    with tempfile.TemporaryDirectory(prefix="bwtune-fleet-bench-") as tmp:
        folder = Path(tmp)
        matrix_path = matrix(folder, args.launches)
        rows = [sweep(folder, hosts, matrix_path) for hosts in sorted(set(args.hosts))]
    base = next((r["wall_s"] for r in rows if r["hosts"] == 1), rows[0]["wall_s"])
    print(
        f"grid of {rows[0]['launches']} launches, stand-in start-up scale {args.scale}, "
        f"{os.cpu_count()} cores"
    )
    print(f"{'hosts':>5}  {'wall':>8}  {'vs 1 host':>9}  launches per host")
    for row in rows:
        per_host = ", ".join(f"{h} {n}" for h, n in sorted(row["per_host"].items()))
        print(f"{row['hosts']:>5}  {row['wall_s']:>7.1f}s  {row['wall_s'] / base:>8.2f}x  {per_host}")


if __name__ == "__main__":
    main()
