"""Time `bwtune plan` on a 10,000-combination matrix: the summary, `--all` and `--json`.

    .venv/bin/python benchmarks/plan_scale.py [--repeat 3] [--width 0]

The matrix is the SM120 mission matrix (examples/qwen35-397b-nvfp4-sm120.yml) widened by
axes to 10 x 5 x 4 x 5 x 10 = 10,000 combinations (the same matrix as benchmarks/plan_10k.py).
Each variant runs `bwtune plan` as a user does (a fresh interpreter, the console script's
module), stdout to a file (a pipe or a file: every column, a row a line); `--width N`
makes rich see a terminal N columns wide instead (COLUMNS, TTY_COMPATIBLE), where the
table is fitted to the width. One table: the best and median wall seconds of each variant,
its lines of output, and its time over `--json`'s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_10k import matrix_10k

VARIANTS = {"plan": [], "plan --all": ["--all"], "plan --json": ["--json"]}


def time_variant(matrix: Path, extra: list[str], env: dict[str, str], out: Path) -> tuple[float, int]:
    argv = [sys.executable, "-m", "bwtune.cli", "plan", str(matrix), *extra]
    start = time.perf_counter()
    with out.open("w") as fh:
        subprocess.run(argv, stdout=fh, env=env, check=True)
    elapsed = time.perf_counter() - start
    with out.open() as fh:
        return elapsed, sum(1 for _ in fh)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--width", type=int, default=0, help="a terminal this wide (0: a file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="plan-scale-") as tmp:
        work = Path(tmp)
        matrix = work / "matrix-10k.yml"
        matrix.write_text(yaml.safe_dump(matrix_10k(), sort_keys=False))
        env = {**os.environ, "BWTUNE_HOME": str(work / "home")}
        env.pop("BWTUNE_DB", None)
        for name in ("COLUMNS", "TTY_COMPATIBLE", "FORCE_COLOR"):
            env.pop(name, None)
        if args.width:
            env.update(COLUMNS=str(args.width), TTY_COMPATIBLE="1", NO_COLOR="1")
        else:
            env["TTY_COMPATIBLE"] = "0"
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        lines: dict[str, int] = {}
        # Interleaved, so a busy moment of the machine falls on every variant alike.
        for _ in range(args.repeat):
            for name, extra in VARIANTS.items():
                elapsed, lines[name] = time_variant(matrix, extra, env, work / "out.txt")
                times[name].append(elapsed)
    where = f"a terminal {args.width} columns wide" if args.width else "stdout to a file"
    print(f"bwtune plan, 10,000 combinations, {where}, {args.repeat} runs each (wall seconds)")
    json_best = min(times["plan --json"])
    print(f"{'variant':<13} {'best':>7} {'median':>7} {'lines':>7} {'/ json':>7}")
    for name, taken in times.items():
        print(
            f"{name:<13} {min(taken):7.2f} {statistics.median(taken):7.2f} {lines[name]:7d} "
            f"{min(taken) / json_best:7.2f}"
        )


if __name__ == "__main__":
    main()
