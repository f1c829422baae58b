# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""What a parsed matrix is: its error (with the bad value's key path), workloads, axes, and its points."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import bench_workload
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import FlagTable

Path = tuple[Any, ...]

TOP_LEVEL_KEYS = (
    "model",
    "hardware",
    "sglang",
    "base",
    "axes",
    "bundles",
    "exclude",
    "workloads",
    "objective",
    "estimates",
    "limits",
)
GOALS = ("max", "min")
OBJECTIVE_METRICS = frozenset(
    {"request_throughput", "output_throughput", "total_throughput", "output_tok_s_per_request"}
    | {"accept_length", "goodput", "completed"}
    | {"capacity"}  # a capacity workload's (capacity_search): requests/s under its SLO
    | {
        f"{stat}_{what}_ms"
        for stat in ("mean", "median", "p90", "p99")
        for what in ("ttft", "tpot", "itl", "e2e_latency")
    }
)
DEFAULT_STARTUP_S = 600.0
DEFAULT_WORKLOAD_S = 120.0
# The most combinations (the product of the axes, before `exclude`) a matrix may expand to
# unless its `limits.combinations` says more: checked before anything is expanded.
MAX_COMBINATIONS = 100_000
MAX_GPUS = 1024
# Flags whose value is a secret: in a matrix it would be written to every results line, the
# reports and the database. The sweep passes the key itself (sweep_api_key).
SECRET_FLAGS = {"api-key": "sweep_api_key", "admin-api-key": "sweep_api_key"}


class MatrixError(ValueError):
    """Bad input in a matrix: the key path of the bad value and what is wrong with it."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = tuple(path)
        self.message = message

    def dotted(self) -> str:
        """`axes.moe-runner-backend[2]`."""
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out

    def __str__(self) -> str:
        where = self.dotted()
        return f"{where}: {self.message}" if where else self.message


@dataclass(frozen=True)
class Workload:
    """A matrix workload: what the benchmark client runs, plus the planner's time estimate.

    The keys, defaults and checks are bench_workload.Workload's (= bench_client.Workload):
    one definition for the matrix, the plan and the sweep.
    """

    run: bench_workload.Workload
    estimate_s: float | None = None

    @property
    def name(self) -> str:
        return self.run.name

    def to_dict(self) -> dict[str, Any]:
        """Every key, so the sweep's bench_client.Workload.from_dict gets exactly this workload."""
        out = self.run.to_dict()
        if self.estimate_s is not None:
            out["estimate_s"] = self.estimate_s
        return out


@dataclass(frozen=True)
class Axis:
    """One sweep dimension: a flag (values are flag values) or a bundle (values are bundle names)."""

    name: str
    values: tuple[Any, ...]
    # For each value, the flags it sets, already coerced: {flag: value}.
    flag_sets: tuple[dict[str, Any], ...]
    is_bundle: bool = False


@dataclass
class Matrix:
    model_path: str
    model: dict[str, Any]
    gpu: str
    gpu_count: int | None
    sglang_version: str
    base: dict[str, Any]
    axes: list[Axis]
    excludes: list[dict[str, tuple[Any, ...]]]
    workloads: list[Workload]
    objective: dict[str, Any] | None
    startup_s: float = DEFAULT_STARTUP_S
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    # The flag table the matrix was checked against: the catalog's, or the node's own parser.
    table: FlagTable | None = field(default=None, repr=False)

    def points(self) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """Every (point, flags) not removed by `exclude`, in axis order (last axis varies fastest).

        `point` is axis -> value as written; `flags` is base + the axis values' flags.
        """
        names = [axis.name for axis in self.axes]
        choices = [list(zip(axis.values, axis.flag_sets, strict=True)) for axis in self.axes]
        for combo in itertools.product(*choices):
            point = {name: value for name, (value, _flags) in zip(names, combo, strict=True)}
            if any(_matches(point, ex) for ex in self.excludes):
                continue
            flags = dict(self.base)
            for _value, flag_set in combo:
                flags.update(flag_set)
            yield point, flags

    def size(self) -> int:
        total = 1
        for axis in self.axes:
            total *= len(axis.values)
        return total


def _matches(point: dict[str, Any], exclude: dict[str, tuple[Any, ...]]) -> bool:
    return all(_in(point[name], values) for name, values in exclude.items())


def _in(value: Any, values: tuple[Any, ...]) -> bool:
    return any(_same(value, v) for v in values)


def _same(a: Any, b: Any) -> bool:
    # YAML 1 and true are equal in Python; a matrix keeps them apart.
    return type(a) is type(b) and a == b
