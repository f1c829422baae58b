# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The matrix's sections checked one by one: flags (no secrets), numbers, workloads, axes, excludes."""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import bench_workload
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix_model import (
    GOALS,
    OBJECTIVE_METRICS,
    SECRET_FLAGS,
    Axis,
    MatrixError,
    Path,
    Workload,
    _in,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import flag_bounds
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import CatalogError, FlagTable


def expect(value: Any, kind: type | tuple[type, ...], path: Path, what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MatrixError(path, f"expected {what}, got {describe(value)}")
    return value


def describe(value: Any) -> str:
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
        raise MatrixError(path, f"a flag name must be a string, got {describe(value)}")
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


def flag_mapping(table: FlagTable, raw: Any, path: Path) -> dict[str, Any]:
    """A mapping of flags (base, a bundle) -> {canonical name: coerced value}."""
    if raw is None:
        return {}
    expect(raw, dict, path, "a mapping of flag: value")
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


def positive_int(raw: dict[str, Any], key: str, path: Path, required: bool = True) -> int | None:
    if key not in raw or raw[key] is None:
        if required:
            raise MatrixError(path, f"missing {key}")
        return None
    value = expect(raw[key], int, (*path, key), "a positive integer")
    if value <= 0:
        raise MatrixError((*path, key), f"expected a positive integer, got {value}")
    return int(value)


def positive_number(raw: dict[str, Any], key: str, path: Path) -> float | None:
    if key not in raw or raw[key] is None:
        return None
    value = expect(raw[key], (int, float), (*path, key), "a positive number")
    if not math.isfinite(value):
        raise MatrixError((*path, key), f"expected a finite number, got {value}")
    if value <= 0:
        raise MatrixError((*path, key), f"expected a positive number, got {value}")
    return float(value)


def parse_workloads(raw: Any) -> list[Workload]:
    path: Path = ("workloads",)
    if raw is None:
        return []
    expect(raw, list, path, "a list of workloads")
    seen: set[str] = set()
    out = []
    for i, item in enumerate(raw):
        where = (*path, i)
        expect(item, dict, where, "a workload mapping")
        for key in item:
            if key not in bench_workload.WORKLOAD_KEYS:
                known = ", ".join(bench_workload.WORKLOAD_KEYS)
                raise MatrixError((*where, key), f"unknown workload key {key!r} (known: {known})")
        name = expect(item.get("name"), str, (*where, "name"), "a workload name")
        if name in seen:
            raise MatrixError((*where, "name"), f"workload {name!r} is defined twice")
        seen.add(name)
        # The client has defaults for these; a matrix says what it measures.
        for key in ("input_len", "output_len"):
            if item.get(key) is None:
                raise MatrixError(where, f"missing {key}")
        estimate_s = positive_number(item, "estimate_s", where)
        try:
            run = bench_workload.Workload.from_dict(item)
        except bench_workload.WorkloadError as err:
            raise MatrixError((*where, *err.key), err.reason) from None
        out.append(Workload(run, estimate_s))
    return out


def parse_objective(raw: Any, workloads: list[Workload]) -> dict[str, Any] | None:
    path: Path = ("objective",)
    if raw is None:
        return None
    expect(raw, dict, path, "a mapping with workload, metric and goal")
    workload = expect(raw.get("workload"), str, (*path, "workload"), "a workload name")
    if workload not in {w.name for w in workloads}:
        raise MatrixError((*path, "workload"), f"no workload named {workload!r}")
    metric = expect(raw.get("metric"), str, (*path, "metric"), "a metric name")
    if metric not in OBJECTIVE_METRICS:
        raise MatrixError((*path, "metric"), f"unknown metric {metric!r}")
    if metric == "capacity" and next(w for w in workloads if w.name == workload).run.capacity is None:
        raise MatrixError(
            (*path, "metric"),
            f"metric capacity needs workload {workload!r} to be a capacity search (capacity:)",
        )
    goal = raw.get("goal", "max")
    if goal not in GOALS:
        raise MatrixError((*path, "goal"), f"goal must be max or min, got {describe(goal)}")
    return {"workload": workload, "metric": metric, "goal": goal}


def parse_axes(table: FlagTable, raw: Any, bundles_raw: Any, base: dict[str, Any]) -> list[Axis]:
    expect(raw, dict, ("axes",), "a mapping of axis: [values]")
    bundles = {} if bundles_raw is None else expect(bundles_raw, dict, ("bundles",), "a mapping")
    for name in bundles:
        if name not in raw:
            raise MatrixError(("bundles", name), f"bundle {name!r} is not used by any axis")
    axes: list[Axis] = []
    set_by: dict[str, Path] = {}
    for name, values in raw.items():
        path: Path = ("axes", name)
        if not isinstance(name, str):
            raise MatrixError(path, f"an axis name must be a string, got {describe(name)}")
        expect(values, list, path, "a list of values")
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
            raise MatrixError(path, f"expected a flag value, got {describe(value)}")
        canonical, coerced = _coerce_flag(table, flag, value, path)
        if _in(value, tuple(seen)):
            raise MatrixError(path, f"value {value!r} is listed twice")
        seen.append(value)
        flag_sets.append({canonical: coerced})
    return Axis(name, tuple(values), tuple(flag_sets))


def _bundle_axis(table: FlagTable, name: str, values: list[Any], bundle_raw: Any) -> Axis:
    expect(bundle_raw, dict, ("bundles", name), "a mapping of bundle name: flags")
    flag_sets = []
    for i, value in enumerate(values):
        path = ("axes", name, i)
        if not isinstance(value, str):
            raise MatrixError(path, f"expected a bundle name of bundles.{name}, got {describe(value)}")
        if value not in bundle_raw:
            known = ", ".join(str(k) for k in bundle_raw)
            raise MatrixError(path, f"unknown bundle {value!r} (bundles.{name} has: {known})")
        if values.index(value) != i:
            raise MatrixError(path, f"bundle {value!r} is listed twice")
        flag_sets.append(flag_mapping(table, bundle_raw[value], ("bundles", name, value)))
    for key in bundle_raw:
        if not isinstance(key, str):
            raise MatrixError(("bundles", name), f"bundle names must be strings, got {describe(key)}")
    return Axis(name, tuple(values), tuple(flag_sets), is_bundle=True)


def parse_excludes(raw: Any, axes: list[Axis]) -> list[dict[str, tuple[Any, ...]]]:
    if raw is None:
        return []
    expect(raw, list, ("exclude",), "a list of {axis: value} mappings")
    by_name = {axis.name: axis for axis in axes}
    out = []
    for i, item in enumerate(raw):
        path: Path = ("exclude", i)
        expect(item, dict, path, "a mapping of axis: value (or [values])")
        if not item:
            raise MatrixError(path, "an empty exclude would remove every point")
        entry: dict[str, tuple[Any, ...]] = {}
        for key, value in item.items():
            if key not in by_name:
                raise MatrixError((*path, key), f"{key!r} is not an axis")
            values = tuple(value) if isinstance(value, list) else (value,)
            for v in values:
                if not _in(v, by_name[key].values):
                    raise MatrixError((*path, key), f"{describe(v)} is not a value of axis {key}")
            entry[key] = values
        out.append(entry)
    return out
