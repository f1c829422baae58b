# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""What a result is ranked by: its objective's value and interval, pooled launches, the best."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_fields, student_t
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_line import (
    is_number_or_null,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_vocab import (
    DEFAULT_GOAL,
    OK,
)


def better(a: float, b: float, goal: str) -> bool:
    return a > b if goal == "max" else a < b


def metric_value(
    line: Mapping[str, Any], objective: Mapping[str, Any], workload: str | None = None
) -> float | None:
    """The objective's metric in a line, whatever its status (None when not measured)."""
    block = (line.get("metrics") or {}).get(workload or objective.get("workload")) or {}
    value = (block.get("values") or {}).get(objective.get("metric"))
    return float(value) if value is not None and is_number_or_null(value) else None


def metric_ci95(
    line: Mapping[str, Any], objective: Mapping[str, Any], workload: str | None = None
) -> tuple[float, float] | None:
    block = (line.get("metrics") or {}).get(workload or objective.get("workload")) or {}
    pair = (block.get("ci95") or {}).get(objective.get("metric"))
    if (
        isinstance(pair, (list, tuple))
        and len(pair) == 2
        and all(is_number_or_null(v) and v is not None for v in pair)
    ):
        return float(pair[0]), float(pair[1])
    return None


def metric_repetitions(
    line: Mapping[str, Any], objective: Mapping[str, Any], workload: str | None = None
) -> list[float]:
    """The objective's metric in each repetition of a line: one launch's samples."""
    block = (line.get("metrics") or {}).get(workload or objective.get("workload")) or {}
    metric = objective.get("metric")
    return [
        float(rep[metric])
        for rep in block.get("repetitions") or []
        if isinstance(rep, Mapping) and rep.get(metric) is not None and is_number_or_null(rep[metric])
    ]


def eligible_value(
    line: Mapping[str, Any], objective: Mapping[str, Any], workload: str | None = None
) -> float | None:
    """The value a line competes with: only status ok can win (wrong-output never does)."""
    return metric_value(line, objective, workload) if line.get("status") == OK else None


_CONFIG_ID_JSON = str(results_fields.BY_NAME["config_id"].json)


def launch_key(line: Mapping[str, Any]) -> tuple[str, str, str]:
    """What makes lines launches of one config: the same host, config id and stack."""
    return (
        str(line.get("host")),
        str(line.get("config_id") or line.get(_CONFIG_ID_JSON)),  # a `--json` result's name for it
        str(line.get("stack_fingerprint")),
    )


def workload_signature(line: Mapping[str, Any], objective: Mapping[str, Any]) -> str | None:
    """The objective's workload as the line was measured with it (its metrics block's
    `workload`, every key written out), as text to compare; None when the line lacks it."""
    block = (line.get("metrics") or {}).get(objective.get("workload")) or {}
    workload = block.get("workload") if isinstance(block, Mapping) else None
    if not isinstance(workload, Mapping):
        return None
    return json.dumps({k: v for k, v in workload.items() if k != "name"}, sort_keys=True, default=str)


def _same_workload(a: str | None, b: str | None) -> bool:
    return a is None or b is None or a == b  # a line of an older node cannot tell: it counts


def _newest(measured: Sequence[tuple[float, Mapping[str, Any]]]) -> Mapping[str, Any]:
    return max(enumerate(measured), key=lambda m: (str(m[1][1].get("finished_at") or ""), m[0]))[1][1]


def pooled_launches(
    lines: Iterable[Mapping[str, Any]], objective: Mapping[str, Any]
) -> dict[tuple[str, str, str], tuple[float, list[tuple[float, Mapping[str, Any]]]]]:
    """Each config's eligible launches by `launch_key`, in the order given, as (the mean of
    their values, [(value, line), ...]): the value a config competes with in `pick_best`,
    and what a report shows for it. Only launches measured with the same objective workload
    as the config's newest one are pooled: values of other workloads are never averaged."""
    groups: dict[tuple[str, str, str], list[tuple[float, Mapping[str, Any]]]] = {}
    for line in lines:
        value = eligible_value(line, objective)
        if value is not None:
            groups.setdefault(launch_key(line), []).append((value, line))
    pooled = {}
    for key, measured in groups.items():
        newest = workload_signature(_newest(measured), objective)
        measured = [m for m in measured if _same_workload(workload_signature(m[1], objective), newest)]
        pooled[key] = (math.fsum(value for value, _line in measured) / len(measured), measured)
    return pooled


def pick_best(lines: Iterable[Mapping[str, Any]], objective: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The best line by the objective among status ok; equal values go to the first by
    (host, config id), so the winner does not depend on the order lines arrived in.

    A config measured more than once (the same host, config id and stack: a re-measure of
    the top candidates, or a config measured again) competes with the mean of its values
    (`pooled_launches`), and stands for itself by its last line (latest finished_at). A
    config whose last launch failed (a re-measure that crashed) does not win: it is not safe
    to serve, and its last line is a failure."""
    lines = list(lines)
    last_status: dict[tuple[str, str, str], tuple[str, int, Any]] = {}
    for n, line in enumerate(lines):
        order = (str(line.get("finished_at") or ""), n, line.get("status"))
        key = launch_key(line)
        if key not in last_status or order[:2] > last_status[key][:2]:
            last_status[key] = order
    groups = pooled_launches(lines, objective)
    candidates = []
    for key in sorted(groups):
        if last_status[key][2] != OK:
            continue
        pooled, measured = groups[key]
        last = max(measured, key=lambda m: str(m[1].get("finished_at") or ""))[1]
        candidates.append((pooled, last))
    if not candidates:
        return None
    # Configs measured under different workloads (a matrix edited between a run and its
    # re-measure) are never ranked against each other: the newest workload's are.
    newest = workload_signature(_newest([(0.0, last) for _pooled, last in candidates]), objective)
    candidates = [c for c in candidates if _same_workload(workload_signature(c[1], objective), newest)]
    sign = 1.0 if objective.get("goal", DEFAULT_GOAL) == "max" else -1.0
    return max(candidates, key=lambda c: sign * c[0])[1]


# --------------------------------------------------------------------------- statistics


def mean_ci95(values: Sequence[float]) -> tuple[float, tuple[float, float] | None, float | None]:
    """(mean, two-sided 95% Student-t interval of the mean, coefficient of variation).

    The interval and the CV are None with fewer than two values. This is what a results
    line's `ci95` and `cv` mean.
    """
    n = len(values)
    if n == 0:
        raise ValueError("mean_ci95 needs at least one value")
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None, None
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = student_t.t_ppf(0.975, n - 1) * sd / math.sqrt(n)
    cv = sd / abs(mean) if mean else None
    return mean, (mean - half, mean + half), cv


def intervals_overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """True when two 95% intervals share a point: the values are within each other's noise."""
    if a is None or b is None:
        return False
    return a[0] <= b[1] and b[0] <= a[1]
