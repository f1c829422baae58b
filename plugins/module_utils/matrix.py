# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sweep matrix: validate the user's description of a sweep and expand it into points.

A matrix is plain data (parsed YAML or JSON). Every error is a MatrixError carrying the
key path of the bad value, e.g. ("axes", "moe-runner-backend", 2), so a caller that kept
the YAML line numbers can say "examples/x.yml:12: axes.moe-runner-backend[2]: ...".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils import bench_workload, flag_bounds
from ansible_collections.bwtune.sglang.plugins.module_utils.catalog import CatalogError, FlagTable
from ansible_collections.bwtune.sglang.plugins.module_utils.gpu_info import node_sm
from ansible_collections.bwtune.sglang.plugins.module_utils.installed_flags import (
    installed_sglang,
    installed_table,
)
from ansible_collections.bwtune.sglang.plugins.module_utils.rules import GPUS

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


def _expect(value: Any, kind: type | tuple[type, ...], path: Path, what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MatrixError(path, f"expected {what}, got {_describe(value)}")
    return value


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()} (YAML reads bare yes/no/on/off as booleans; quote it)"
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _flag_name(value: Any, path: Path) -> str:
    if not isinstance(value, str) or not value:
        raise MatrixError(path, f"a flag name must be a string, got {_describe(value)}")
    if value.startswith("-"):
        raise MatrixError(path, f"write flag names without dashes: {value.lstrip('-')}")
    return value


def _coerce_flag(table: FlagTable, name: str, value: Any, path: Path) -> tuple[str, Any]:
    if table.lookup(name) is None:
        raise MatrixError(path, table.unknown_flag_message(name))
    try:
        canonical, coerced = table.coerce(name, value)
    except CatalogError as err:
        raise MatrixError(path, str(err)) from None
    _no_secret(canonical, path)
    found = flag_bounds.problem(canonical, coerced)
    if found:
        raise MatrixError(path, found)
    return canonical, coerced


def _no_secret(flag: str, path: Path) -> None:
    if flag in SECRET_FLAGS:
        raise MatrixError(
            path,
            f"a secret does not belong in the matrix (it would be written to every result, report"
            f" and the database): give the server's key as {SECRET_FLAGS[flag]}",
        )


def _flag_mapping(table: FlagTable, raw: Any, path: Path) -> dict[str, Any]:
    """A mapping of flags (base, a bundle) -> {canonical name: coerced value}."""
    if raw is None:
        return {}
    _expect(raw, dict, path, "a mapping of flag: value")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = _flag_name(key, (*path, key))
        if name == "model-path":
            raise MatrixError((*path, key), "set the model with model.path, not as a flag")
        canonical, coerced = _coerce_flag(table, name, value, (*path, key))
        if canonical in out:
            raise MatrixError((*path, key), f"--{canonical} is set twice (once through an alias)")
        out[canonical] = coerced
    return out


def _positive_int(raw: dict[str, Any], key: str, path: Path, required: bool = True) -> int | None:
    if key not in raw or raw[key] is None:
        if required:
            raise MatrixError(path, f"missing {key}")
        return None
    value = _expect(raw[key], int, (*path, key), "a positive integer")
    if value <= 0:
        raise MatrixError((*path, key), f"expected a positive integer, got {value}")
    return int(value)


def _positive_number(raw: dict[str, Any], key: str, path: Path) -> float | None:
    if key not in raw or raw[key] is None:
        return None
    value = _expect(raw[key], (int, float), (*path, key), "a positive number")
    if not math.isfinite(value):
        raise MatrixError((*path, key), f"expected a finite number, got {value}")
    if value <= 0:
        raise MatrixError((*path, key), f"expected a positive number, got {value}")
    return float(value)


def _workloads(raw: Any) -> list[Workload]:
    path: Path = ("workloads",)
    if raw is None:
        return []
    _expect(raw, list, path, "a list of workloads")
    seen: set[str] = set()
    out = []
    for i, item in enumerate(raw):
        where = (*path, i)
        _expect(item, dict, where, "a workload mapping")
        for key in item:
            if key not in bench_workload.WORKLOAD_KEYS:
                known = ", ".join(bench_workload.WORKLOAD_KEYS)
                raise MatrixError((*where, key), f"unknown workload key {key!r} (known: {known})")
        name = _expect(item.get("name"), str, (*where, "name"), "a workload name")
        if name in seen:
            raise MatrixError((*where, "name"), f"workload {name!r} is defined twice")
        seen.add(name)
        # The client has defaults for these; a matrix says what it measures.
        for key in ("input_len", "output_len"):
            if item.get(key) is None:
                raise MatrixError(where, f"missing {key}")
        estimate_s = _positive_number(item, "estimate_s", where)
        try:
            run = bench_workload.Workload.from_dict(item)
        except bench_workload.WorkloadError as err:
            raise MatrixError((*where, *err.key), err.reason) from None
        out.append(Workload(run, estimate_s))
    return out


def _objective(raw: Any, workloads: list[Workload]) -> dict[str, Any] | None:
    path: Path = ("objective",)
    if raw is None:
        return None
    _expect(raw, dict, path, "a mapping with workload, metric and goal")
    workload = _expect(raw.get("workload"), str, (*path, "workload"), "a workload name")
    if workload not in {w.name for w in workloads}:
        raise MatrixError((*path, "workload"), f"no workload named {workload!r}")
    metric = _expect(raw.get("metric"), str, (*path, "metric"), "a metric name")
    if metric not in OBJECTIVE_METRICS:
        raise MatrixError((*path, "metric"), f"unknown metric {metric!r}")
    goal = raw.get("goal", "max")
    if goal not in GOALS:
        raise MatrixError((*path, "goal"), f"goal must be max or min, got {_describe(goal)}")
    return {"workload": workload, "metric": metric, "goal": goal}


def _axes(table: FlagTable, raw: Any, bundles_raw: Any, base: dict[str, Any]) -> list[Axis]:
    _expect(raw, dict, ("axes",), "a mapping of axis: [values]")
    bundles = {} if bundles_raw is None else _expect(bundles_raw, dict, ("bundles",), "a mapping")
    for name in bundles:
        if name not in raw:
            raise MatrixError(("bundles", name), f"bundle {name!r} is not used by any axis")
    axes: list[Axis] = []
    set_by: dict[str, Path] = {}
    for name, values in raw.items():
        path: Path = ("axes", name)
        if not isinstance(name, str):
            raise MatrixError(path, f"an axis name must be a string, got {_describe(name)}")
        _expect(values, list, path, "a list of values")
        if not values:
            raise MatrixError(path, "empty axis: give at least one value")
        if name in bundles:
            axis = _bundle_axis(table, name, values, bundles[name])
        else:
            axis = _flag_axis(table, name, values)
        for flags in axis.flag_sets:
            for flag in flags:
                if flag in set_by and set_by[flag] != path:
                    raise MatrixError(path, f"--{flag} is also set by {'.'.join(map(str, set_by[flag]))}")
                set_by[flag] = path
        axes.append(axis)
    for flag, path in set_by.items():
        if flag in base:
            raise MatrixError(path, f"--{flag} is both in base and swept here; drop it from base")
    return axes


def _flag_axis(table: FlagTable, name: str, values: list[Any]) -> Axis:
    flag = _flag_name(name, ("axes", name))
    if table.lookup(flag) is None:
        raise MatrixError(("axes", name), table.unknown_flag_message(flag))
    _no_secret(table.canonical(flag) or flag, ("axes", name))
    flag_sets = []
    seen: list[Any] = []
    for i, value in enumerate(values):
        path = ("axes", name, i)
        if isinstance(value, (dict, list)):
            raise MatrixError(path, f"expected a flag value, got {_describe(value)}")
        canonical, coerced = _coerce_flag(table, flag, value, path)
        if _in(value, tuple(seen)):
            raise MatrixError(path, f"value {value!r} is listed twice")
        seen.append(value)
        flag_sets.append({canonical: coerced})
    return Axis(name, tuple(values), tuple(flag_sets))


def _bundle_axis(table: FlagTable, name: str, values: list[Any], bundle_raw: Any) -> Axis:
    _expect(bundle_raw, dict, ("bundles", name), "a mapping of bundle name: flags")
    flag_sets = []
    for i, value in enumerate(values):
        path = ("axes", name, i)
        if not isinstance(value, str):
            raise MatrixError(path, f"expected a bundle name of bundles.{name}, got {_describe(value)}")
        if value not in bundle_raw:
            known = ", ".join(str(k) for k in bundle_raw)
            raise MatrixError(path, f"unknown bundle {value!r} (bundles.{name} has: {known})")
        if values.index(value) != i:
            raise MatrixError(path, f"bundle {value!r} is listed twice")
        flag_sets.append(_flag_mapping(table, bundle_raw[value], ("bundles", name, value)))
    for key in bundle_raw:
        if not isinstance(key, str):
            raise MatrixError(("bundles", name), f"bundle names must be strings, got {_describe(key)}")
    return Axis(name, tuple(values), tuple(flag_sets), is_bundle=True)


def _excludes(raw: Any, axes: list[Axis]) -> list[dict[str, tuple[Any, ...]]]:
    if raw is None:
        return []
    _expect(raw, list, ("exclude",), "a list of {axis: value} mappings")
    by_name = {axis.name: axis for axis in axes}
    out = []
    for i, item in enumerate(raw):
        path: Path = ("exclude", i)
        _expect(item, dict, path, "a mapping of axis: value (or [values])")
        if not item:
            raise MatrixError(path, "an empty exclude would remove every point")
        entry: dict[str, tuple[Any, ...]] = {}
        for key, value in item.items():
            if key not in by_name:
                raise MatrixError((*path, key), f"{key!r} is not an axis")
            values = tuple(value) if isinstance(value, list) else (value,)
            for v in values:
                if not _in(v, by_name[key].values):
                    raise MatrixError((*path, key), f"{_describe(v)} is not a value of axis {key}")
            entry[key] = values
        out.append(entry)
    return out


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
    _expect(raw, dict, (), "a mapping at the top of the matrix")
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            raise MatrixError((key,), f"unknown key (known: {', '.join(TOP_LEVEL_KEYS)})")
    model = _expect(raw.get("model"), dict, ("model",), "a mapping with path")
    model_path = _expect(model.get("path"), str, ("model", "path"), "the model's path")
    hardware = raw.get("hardware") or {}
    _expect(hardware, dict, ("hardware",), "a mapping with gpu and count")
    gpu_count = _positive_int(hardware, "count", ("hardware",), required=False)
    if gpu_count is not None and gpu_count > MAX_GPUS:
        raise MatrixError(("hardware", "count"), f"expected at most {MAX_GPUS} GPUs, got {gpu_count}")
    resolved_gpu = _resolve_gpu(gpu or hardware.get("gpu"), facts)
    stack = raw.get("sglang") or {}
    _expect(stack, dict, ("sglang",), "a mapping with version")
    version, table = _resolve_release(sglang_version or stack.get("version"), facts, table_for)
    _check_combinations(raw)
    base = _flag_mapping(table, raw.get("base"), ("base",))
    axes = _axes(table, raw.get("axes"), raw.get("bundles"), base)
    workloads = _workloads(raw.get("workloads"))
    estimates = raw.get("estimates") or {}
    _expect(estimates, dict, ("estimates",), "a mapping with startup_s")
    startup_s = _positive_number(estimates, "startup_s", ("estimates",)) or DEFAULT_STARTUP_S
    return Matrix(
        model_path=model_path,
        model=dict(model),
        gpu=resolved_gpu,
        gpu_count=gpu_count,
        sglang_version=version,
        base=base,
        axes=axes,
        excludes=_excludes(raw.get("exclude"), axes),
        workloads=workloads,
        objective=_objective(raw.get("objective"), workloads),
        startup_s=startup_s,
        raw=raw,
        table=table,
    )


def max_combinations(raw: dict[str, Any]) -> int:
    """The matrix's own `limits.combinations`, or MAX_COMBINATIONS."""
    limits = raw.get("limits")
    if limits is None:
        return MAX_COMBINATIONS
    _expect(limits, dict, ("limits",), "a mapping with combinations")
    for key in limits:
        if key != "combinations":
            raise MatrixError(("limits", key), "unknown key (known: combinations)")
    return _positive_int(limits, "combinations", ("limits",), required=False) or MAX_COMBINATIONS


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


AUTO_WITHOUT_FACTS = "{what} is auto but no facts give it (gather facts first, or set it)"
# SM tags the rules do not cover, and the family whose rules a user may choose for them.
_FAMILIES = {"sm9": "sm90", "sm10": "sm100", "sm12": "sm120"}


def _setting(value: Any, path: Path, what: str) -> str:
    if value is None:
        raise MatrixError(path, f"missing {what} (a value, or auto to take it from the node's facts)")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise MatrixError(path, f'write the {what} as a quoted string ("{value}"), YAML read a number')
    return str(_expect(value, str, path, f"the {what}"))


def _facts_part(facts: dict[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    found = (facts or {}).get(key)
    return found if isinstance(found, Mapping) else None


def _resolve_gpu(value: Any, facts: dict[str, Any] | None) -> str:
    """`hardware.gpu`: as written, or the node's SM tag (`bwtune_gpu.sm`) for auto."""
    path: Path = ("hardware", "gpu")
    value = _setting(value, path, "GPU")
    gpu_facts = _facts_part(facts, "gpu")
    if value == "auto":
        if gpu_facts is None:
            raise MatrixError(path, AUTO_WITHOUT_FACTS.format(what="GPU"))
        try:
            sm = node_sm(dict(gpu_facts))
        except ValueError as err:
            raise MatrixError(path, str(err)) from None
        if sm not in GPUS:
            raise MatrixError(path, _uncovered_gpu(sm, gpu_facts))
        return sm
    node = gpu_facts.get("sm") if gpu_facts and gpu_facts.get("available") else None
    if node in GPUS and node != value:
        raise MatrixError(
            path,
            f"the matrix is for {value} but the node's GPUs are {node} ({gpu_facts.get('message')}):"  # type: ignore[union-attr]
            f" set hardware.gpu to {node} or auto",
        )
    return value


def _uncovered_gpu(sm: str, gpu_facts: Mapping[str, Any]) -> str:
    known = ", ".join(GPUS)
    message = (
        f"gpu: auto found {sm} ({gpu_facts.get('message')}), which bwtune's rules do not cover"
        f" (they know {known})"
    )
    family = next(
        (
            tag
            for prefix, tag in _FAMILIES.items()
            if sm[: len(prefix)] == prefix and sm[len(prefix) :].isdigit()
        ),
        None,
    )
    if family:
        return f"{message}: set hardware.gpu: {family} yourself if {family}'s rules hold for {sm}"
    return message


def _resolve_release(value: Any, facts: dict[str, Any] | None, table_for: Any) -> tuple[str, FlagTable]:
    """(version, flag table) for `sglang.version`: as written, or the node's installed SGLang.

    With stack facts of an installed SGLang, the matrix must be for that release, and the
    table is the node's own parser (rules still apply by version range).
    """
    path: Path = ("sglang", "version")
    value = _setting(value, path, "SGLang version")
    stack = _facts_part(facts, "stack")
    sglang = installed_sglang(stack)
    installed = sglang.get("version") if sglang.get("installed") else None
    where = f"the node's stack ({(stack or {}).get('python') or 'python'})"
    if value == "auto":
        if stack is None:
            raise MatrixError(path, AUTO_WITHOUT_FACTS.format(what="SGLang version"))
        if not installed:
            raise MatrixError(path, f"SGLang version is auto but {where} has no SGLang installed")
        value = str(installed)
    elif installed and value != installed:
        raise MatrixError(
            path,
            f"the matrix is for SGLang {value} but {where} has SGLang {installed} installed:"
            f" set sglang.version to auto or {installed!r}",
        )
    table = None
    if installed:
        try:
            table = installed_table(stack)
        except CatalogError as err:
            raise MatrixError(path, f"the node's SGLang {installed}: {err}") from None
    if table is None:
        try:
            table = table_for(value)
        except CatalogError as err:
            hint = (
                "; the node's stack facts carry no flags of its own parser (gather them with"
                " stack_facts include_flags: true)"
                if installed
                else ""
            )
            raise MatrixError(path, f"{err}{hint}") from None
    return value, table
