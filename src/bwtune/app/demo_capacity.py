"""The demo's small capacity run (issue 26): `bwtune demo --capacity`.

A small version of `examples/qwen35-397b-capacity.yml` on the demo's model: that example's
SLO, objective (`metric: capacity`), MoE runners and speculative bundles (MTP on and off),
with the FP4 GEMM backend held at one value (4 configs, not 8), the attention backend left
at the demo's default and short requests, so that
a 100-request round at the stand-in's capacity lasts seconds: each config's search on its
warm server takes about half a minute, the whole run a few minutes. It is opt-in: the
plain demo (examples/demo.yml) stays as short as it was.

Nothing here parses a command line or prints: `bwtune.commands.demo` builds the request
with `capacity_matrix` and renders `summary`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import plan
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import CatalogError
from bwtune import matrix_file
from bwtune.analysis import capacity as capacity_view
from bwtune.analysis import pareto
from bwtune.app.sweep_inputs import BadInput, load_matrix

DEMO_MATRIX = Path("examples") / "demo.yml"
CAPACITY_EXAMPLE = Path("examples") / "qwen35-397b-capacity.yml"
# The example's 1024 in / 256 out at 2-8 requests/s is 15-100 s a round: these requests are
# short enough that the stand-in's capacities (about 8 to 22 requests/s) make rounds of 5-12 s.
INPUT_LEN, OUTPUT_LEN = 128, 32
START_RATE = 12  # requests/s: within 2x of every config's capacity, so 5 rounds land near it
MAX_ROUNDS = 5
ESTIMATE_S = 60  # one config's search: 5 rounds of 100 requests at 8-24 requests/s, and their latency
FIXED = {"fp4-gemm-backend": "flashinfer_cutlass"}  # the example's third axis, held at one value


def capacity_matrix(root: Path) -> tuple[dict[str, Any], str]:
    """The demo's capacity matrix and the file it is a small version of (its matrix_source).

    The demo's model, hardware and release (examples/demo.yml) with the capacity example's
    SLO, objective, axes and bundles. BadInput when either file is not as this expects."""
    demo = load_matrix(root / DEMO_MATRIX)
    example_path = root / CAPACITY_EXAMPLE
    try:
        example = matrix_file.load(example_path).data
    except matrix_file.MatrixFileError as err:
        raise BadInput(str(err)) from None
    workloads = [w for w in example.get("workloads") or [] if isinstance(w, dict) and w.get("capacity")]
    if not workloads or not isinstance(example.get("axes"), dict):
        raise BadInput(f"{example_path}: no capacity workload and axes for the demo's capacity run")
    workload = copy.deepcopy(workloads[0])
    workload.update({"input_len": INPUT_LEN, "output_len": OUTPUT_LEN, "estimate_s": ESTIMATE_S})
    workload["capacity"] = {**workload["capacity"], "start_rate": START_RATE, "max_rounds": MAX_ROUNDS}
    workload.pop("max_rate", None)
    axes = {k: list(v) for k, v in example["axes"].items() if k not in FIXED and isinstance(v, list)}
    # An axis of one value (attention-backend) is left out: the stand-in has recorded SGLang's
    # verdicts for the demo's flags (standin/sglang_verdicts.json), and these stay within them.
    axes = {axis: values for axis, values in axes.items() if len(values) > 1}
    base = {**(demo.get("base") or {}), **FIXED}
    matrix = {
        "model": copy.deepcopy(demo["model"]),
        "hardware": copy.deepcopy(demo["hardware"]),
        "sglang": copy.deepcopy(demo["sglang"]),
        "base": base,
        "axes": axes,
        "bundles": copy.deepcopy(example.get("bundles") or {}),
        "workloads": [workload],
        "objective": copy.deepcopy(example["objective"]),
        "estimates": copy.deepcopy(demo.get("estimates") or {}),
    }
    try:
        plan(matrix)
    except (MatrixError, CatalogError) as err:
        raise BadInput(f"{example_path}: the demo's small version of it does not plan: {err}") from None
    return matrix, str(example_path)


def summary(output: dict[str, Any]) -> dict[str, Any]:
    """What the demo prints after its table: each capacity workload's configs (highest
    first, analysis.capacity) and their Pareto fronts (analysis.pareto), as
    plain data: {simulated, capacity: [rows], fronts: [front], speed_fronts: [front]} (the
    capacity workloads' only: throughput against each latency percentile, and per-user
    speed against throughput per GPU)."""
    simulated = bool((output.get("summary") or {}).get("simulated"))
    rows = capacity_view.capacity_rows(output.get("results") or [], simulated=simulated)
    workloads = {row["workload"] for row in rows}
    fronts = [f for f in pareto.fronts(output) if f["workload"] in workloads]
    speed = [f for f in pareto.speed_fronts(output) if f["workload"] in workloads]
    return {"simulated": simulated, "capacity": rows, "fronts": fronts, "speed_fronts": speed}
