# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The sweep matrix: validate the user's description of a sweep and expand it into points.

A matrix is plain data (parsed YAML or JSON). Every error is a MatrixError carrying the
key path of the bad value, e.g. ("axes", "moe-runner-backend", 2), so a caller that kept
the YAML line numbers can say "examples/x.yml:12: axes.moe-runner-backend[2]: ...".

Its parts: matrix_model (what a matrix is, its points), matrix_fields (each section
checked), matrix_auto (`auto` from facts); here, the whole matrix parsed and its size limit.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix_auto import (
    resolve_gpu,
    resolve_release,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix_fields import (
    expect,
    flag_mapping,
    parse_axes,
    parse_excludes,
    parse_objective,
    parse_workloads,
    positive_int,
    positive_number,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix_model import (
    DEFAULT_STARTUP_S,
    DEFAULT_WORKLOAD_S,
    MAX_COMBINATIONS,
    MAX_GPUS,
    SECRET_FLAGS,
    TOP_LEVEL_KEYS,
    Axis,
    Matrix,
    MatrixError,
    Workload,
)

# What the planner and the tests read by this module's name.
__all__ = [
    "DEFAULT_WORKLOAD_S",
    "MAX_COMBINATIONS",
    "SECRET_FLAGS",
    "Axis",
    "Matrix",
    "MatrixError",
    "Workload",
    "max_combinations",
    "parse",
]


def parse(
    raw: Any,
    table_for: Any,
    gpu: str | None = None,
    sglang_version: str | None = None,
    facts: dict[str, Any] | None = None,
) -> Matrix:
    """Validate a matrix and resolve its GPU and SGLang release.

    `table_for(version) -> FlagTable`; `gpu` / `sglang_version` override the matrix. `facts`
    is `{"gpu": bwtune_gpu, "stack": bwtune_stack, "checkpoint": bwtune_checkpoint}` as the
    facts modules return them (docs/facts.md): `auto` is filled from them, and when the node
    has SGLang installed its own parser's flags decide which flags and choices exist.
    """
    expect(raw, dict, (), "a mapping at the top of the matrix")
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            raise MatrixError((key,), f"unknown key (known: {', '.join(TOP_LEVEL_KEYS)})")
    model = expect(raw.get("model"), dict, ("model",), "a mapping with path")
    model_path = expect(model.get("path"), str, ("model", "path"), "the model's path")
    hardware = raw.get("hardware") or {}
    expect(hardware, dict, ("hardware",), "a mapping with gpu and count")
    gpu_count = positive_int(hardware, "count", ("hardware",), required=False)
    if gpu_count is not None and gpu_count > MAX_GPUS:
        raise MatrixError(("hardware", "count"), f"expected at most {MAX_GPUS} GPUs, got {gpu_count}")
    resolved_gpu = resolve_gpu(gpu or hardware.get("gpu"), facts)
    stack = raw.get("sglang") or {}
    expect(stack, dict, ("sglang",), "a mapping with version")
    version, table = resolve_release(sglang_version or stack.get("version"), facts, table_for)
    _check_combinations(raw)
    base = flag_mapping(table, raw.get("base"), ("base",))
    axes = parse_axes(table, raw.get("axes"), raw.get("bundles"), base)
    workloads = parse_workloads(raw.get("workloads"))
    estimates = raw.get("estimates") or {}
    expect(estimates, dict, ("estimates",), "a mapping with startup_s")
    startup_s = positive_number(estimates, "startup_s", ("estimates",)) or DEFAULT_STARTUP_S
    return Matrix(
        model_path=model_path,
        model=dict(model),
        gpu=resolved_gpu,
        gpu_count=gpu_count,
        sglang_version=version,
        base=base,
        axes=axes,
        excludes=parse_excludes(raw.get("exclude"), axes),
        workloads=workloads,
        objective=parse_objective(raw.get("objective"), workloads),
        startup_s=startup_s,
        raw=raw,
        table=table,
    )


def max_combinations(raw: dict[str, Any]) -> int:
    """The matrix's own `limits.combinations`, or MAX_COMBINATIONS."""
    limits = raw.get("limits")
    if limits is None:
        return MAX_COMBINATIONS
    expect(limits, dict, ("limits",), "a mapping with combinations")
    for key in limits:
        if key != "combinations":
            raise MatrixError(("limits", key), "unknown key (known: combinations)")
    return positive_int(limits, "combinations", ("limits",), required=False) or MAX_COMBINATIONS


def _check_combinations(raw: dict[str, Any]) -> None:
    """Refuse a matrix whose axes multiply past the limit, before anything is expanded."""
    axes = raw.get("axes")
    if not isinstance(axes, dict):
        return  # _axes names the problem
    limit = max_combinations(raw)
    total = 1
    for values in axes.values():
        total *= len(values) if isinstance(values, list) and values else 1
    if total > limit:
        sizes = " x ".join(str(len(v)) for v in axes.values() if isinstance(v, list))
        raise MatrixError(
            ("axes",),
            f"{total} combinations ({sizes}) is more than the limit of {limit}: cut axes, or raise it"
            f" with limits: {{combinations: {total}}}",
        )
