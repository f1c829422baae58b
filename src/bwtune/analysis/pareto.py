"""The throughput/latency Pareto front of a run's configs (issue 26).

Per workload, each ok result is one point: a throughput to maximise (`output_throughput`,
output tok/s) against a latency percentile to minimise (`p99_tpot_ms`, `p99_ttft_ms`). A
point is on the front when no other point of that workload is at least as good on both and
better on one. Failed and not-launched results (pruned, duplicate) never take part: a
wrong-output launch can be fast, but it is not a config anyone can serve. Equal points
dominate neither each other: all of them are on the front, or none. Results are read
through the store's `build_run_output`, the view `bwtune export --format json` prints.

`speed_fronts` is the other trade: per-user speed (output tok/s per request) against
output tok/s per GPU (the GPUs one server of the config uses, from its flags), both
maximised, by the same rules.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bwtune import store

THROUGHPUT = "output_throughput"
# The latency percentiles the front is drawn against, in the order a report shows them.
LATENCIES = ("p99_tpot_ms", "p99_ttft_ms")


@dataclass(frozen=True)
class Point:
    """One ok result on one workload."""

    workload: str
    id: str
    host: str
    throughput: float
    latency: float
    on_front: bool = False
    is_best: bool = False  # the run's winner (its objective), marked wherever it lies


def dominates(a: Point, b: Point) -> bool:
    """`a` is at least as good as `b` on both axes and better on one."""
    return (
        a.throughput >= b.throughput
        and a.latency <= b.latency
        and (a.throughput > b.throughput or a.latency < b.latency)
    )


def mark_front(points: Iterable[Point]) -> list[Point]:
    """The points of ONE workload with `on_front` set, highest throughput first (then lowest
    latency, id, host). O(n log n): sweep from the highest throughput down, keeping the
    lowest latency seen at any strictly higher throughput."""
    ordered = sorted(points, key=lambda p: (-p.throughput, p.latency, p.id, p.host))
    marked: list[Point] = []
    best_above = math.inf  # lowest latency among points of strictly higher throughput
    i = 0
    while i < len(ordered):
        j = i
        while j < len(ordered) and ordered[j].throughput == ordered[i].throughput:
            j += 1
        group = ordered[i:j]  # equal throughput: only its lowest latency can be on the front
        lowest = group[0].latency
        for p in group:
            marked.append(_with(p, on_front=p.latency == lowest and lowest < best_above))
        best_above = min(best_above, lowest)
        i = j
    return marked


def _with(point: Point, **changes: Any) -> Point:
    return Point(**{**asdict(point), **changes})


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def points_of(
    results: Sequence[dict[str, Any]],
    latency: str,
    *,
    throughput: str = THROUGHPUT,
    best: tuple[str, str] | None = None,
) -> dict[str, list[Point]]:
    """workload -> its points (front marked) from `--json` results (build_run_output's
    `results`). Only status ok; a result without both numbers on a workload is not a point."""
    by_workload: dict[str, list[Point]] = {}
    for result in results:
        if result.get("status") != "ok":
            continue
        for workload, block in sorted((result.get("metrics") or {}).items()):
            values = (block or {}).get("values") or {}
            tput, lat = _number(values.get(throughput)), _number(values.get(latency))
            if tput is None or lat is None:
                continue
            key = (str(result["host"]), str(result["id"]))
            by_workload.setdefault(workload, []).append(
                Point(workload, key[1], key[0], tput, lat, is_best=key == best)
            )
    return {workload: mark_front(points) for workload, points in sorted(by_workload.items())}


def slo_limit(results: Sequence[dict[str, Any]], workload: str, latency: str) -> float | None:
    """The capacity SLO's threshold for `latency` on `workload`, if a result's capacity block
    states one (every config of a workload is searched against the same SLO)."""
    for result in results:
        block = ((result.get("metrics") or {}).get(workload) or {}).get("capacity")
        if isinstance(block, dict):
            limit = _number((block.get("slo") or {}).get(latency))
            if limit is not None:
                return limit
    return None


def fronts(output: dict[str, Any], *, throughput: str = THROUGHPUT) -> list[dict[str, Any]]:
    """Every (workload, latency) front of a run's `--json` view, as plain data: the `--json`
    and export shape. Each: workload, throughput and latency metric, slo (the capacity SLO's
    threshold or null), simulated, points (each id, host, throughput, latency, on_front,
    is_best; highest throughput first)."""
    results = output["results"]
    best = output.get("best")
    best_key = (str(best["host"]), str(best["id"])) if best else None
    simulated = bool(output["summary"]["simulated"])
    found = []
    for latency in LATENCIES:
        for workload, points in points_of(results, latency, throughput=throughput, best=best_key).items():
            found.append(
                {
                    "workload": workload,
                    "throughput_metric": throughput,
                    "latency_metric": latency,
                    "slo": slo_limit(results, workload, latency),
                    "simulated": simulated,
                    "points": [{k: v for k, v in asdict(p).items() if k != "workload"} for p in points],
                }
            )
    return sorted(found, key=lambda f: (f["workload"], LATENCIES.index(f["latency_metric"])))


def run_fronts(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """The fronts of a stored run (every result, whatever its size)."""
    return fronts(store.build_run_output(conn, run_id))


# Per-user speed against throughput per GPU (issue 26): what a serving operator trades, how
# fast each user's tokens come against how much one GPU serves. Both are maximised.
PER_USER = "output_tok_s_per_request"  # a request's decode rate (tok/s per user)
PER_GPU = "output_tok_s_per_gpu"  # output_throughput / the GPUs the config's server uses


def gpus_of(flags: dict[str, Any] | None) -> int:
    """The GPUs one server of these launch flags uses: tp-size x pp-size, x dp-size unless
    enable-dp-attention (then the data-parallel ranks share the tp GPUs). SGLang's default
    for each is 1; a value that is not a positive whole number counts as 1."""
    flags = {str(k).lstrip("-"): v for k, v in (flags or {}).items()}

    def size(key: str) -> int:
        value = flags.get(key)
        if isinstance(value, bool):
            return 1
        try:
            number = int(str(value))
        except ValueError:
            return 1
        return number if number > 0 else 1

    dp = 1 if flags.get("enable-dp-attention") in (True, "true", "True", 1) else size("dp-size")
    return size("tp-size") * size("pp-size") * dp


def per_user_speed(values: dict[str, Any]) -> float | None:
    """`output_tok_s_per_request`, else 1000 / the mean (or median) TPOT, as the report's
    decode-rate chart reads it."""
    rate = _number(values.get(PER_USER))
    if rate is not None:
        return rate
    tpot = _number(values.get("mean_tpot_ms")) or _number(values.get("median_tpot_ms"))
    return 1000.0 / tpot if tpot else None


def speed_fronts(output: dict[str, Any]) -> list[dict[str, Any]]:
    """Per workload, per-user speed against output tok/s per GPU across the ok configs: a
    point is on the front when no other point of its workload is at least as fast per user
    and serves at least as much per GPU, better on one. Each: workload, per_user_metric,
    per_gpu_metric, simulated, points (id, host, per_user, per_gpu, throughput: the
    server's output tok/s, gpus, on_front, is_best; highest per_gpu first). Failed and
    not-launched results take no part, as in `fronts`."""
    best = output.get("best")
    best_key = (str(best["host"]), str(best["id"])) if best else None
    simulated = bool(output["summary"]["simulated"])
    by_workload: dict[str, list[tuple[Point, float, int]]] = {}  # (point, total tok/s, GPUs)
    for result in output["results"]:
        if result.get("status") != "ok":
            continue
        gpus = gpus_of(result.get("flags"))
        for workload, block in sorted((result.get("metrics") or {}).items()):
            values = (block or {}).get("values") or {}
            user, tput = per_user_speed(values), _number(values.get(THROUGHPUT))
            if user is None or tput is None:
                continue
            key = (str(result["host"]), str(result["id"]))
            # mark_front maximises throughput and minimises latency: per user, negated, is the latter.
            point = Point(workload, key[1], key[0], tput / gpus, -user, is_best=key == best_key)
            by_workload.setdefault(workload, []).append((point, tput, gpus))
    found = []
    for workload, entries in sorted(by_workload.items()):
        server = {(p.host, p.id): (tput, gpus) for p, tput, gpus in entries}
        points = [
            {"id": p.id, "host": p.host, "per_user": -p.latency, "per_gpu": p.throughput,
             "throughput": server[p.host, p.id][0], "gpus": server[p.host, p.id][1],
             "on_front": p.on_front, "is_best": p.is_best}
            for p in mark_front(p for p, _, _ in entries)
        ]  # fmt: skip
        found.append(
            {
                "workload": workload,
                "per_user_metric": PER_USER,
                "per_gpu_metric": PER_GPU,
                "simulated": simulated,
                "points": points,
            }
        )
    return found
