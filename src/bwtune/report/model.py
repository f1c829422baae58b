"""Everything a report shows about one run, gathered from the results database once."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from bwtune import regression, results_db
from bwtune.report import launch

SIMULATED_LABEL = "SIMULATED (bwtune stand-in)"
# Per-request decode rate: reported directly, else derived from the time per output token.
DECODE_RATE = "output_tok_s_per_request"
THROUGHPUT = "output_throughput"


@dataclass(frozen=True)
class Row:
    """One config measured on one host, as the tables and charts show it."""

    id: str
    host: str
    status: str
    label: str  # the flags that vary across the run, e.g. "moe-runner-backend=triton"
    objective: float | None
    ci95: tuple[float, float] | None
    repetitions: int
    is_best: bool
    result: dict[str, Any]


@dataclass(frozen=True)
class ParetoPoint:
    workload: str
    id: str
    host: str
    label: str
    decode_rate: float
    throughput: float
    on_frontier: bool


@dataclass(frozen=True)
class ReportData:
    run_id: str
    created_at: str
    objective: dict[str, Any]
    summary: dict[str, Any]
    plan: dict[str, Any] | None
    simulated: bool
    rows: list[Row]
    best: Row | None
    pareto: list[ParetoPoint]
    failures: dict[str, list[Row]]
    hosts: list[dict[str, Any]]
    launch_command: str | None = None
    launch_command_multiline: str | None = None
    host_vars: str | None = None
    workloads: list[str] = field(default_factory=list)

    @property
    def objective_text(self) -> str:
        o = self.objective
        return f"{o['goal']} {o['metric']} on {o.get('workload') or '(no workload)'}"


def load_report(conn: sqlite3.Connection, run_id: str) -> ReportData:
    output = results_db.build_run_output(conn, run_id)
    summary = output["summary"]
    objective = summary["objective"]
    best_key = (output["best"]["host"], output["best"]["id"]) if output["best"] else None
    varying = _varying_flags(output["results"])
    rows = [_row(result, objective, varying, best_key) for result in output["results"]]
    rows.sort(key=lambda r: _row_order(r, objective))
    best = next((r for r in rows if r.is_best), None)
    failures: dict[str, list[Row]] = {}
    for row in rows:
        if row.status != "ok":
            failures.setdefault(row.status, []).append(row)
    data = ReportData(
        run_id=run_id,
        created_at=summary["created_at"],
        objective=objective,
        summary=summary,
        plan=summary.get("plan"),
        simulated=summary["simulated"],
        rows=rows,
        best=best,
        pareto=_pareto(rows),
        failures=dict(sorted(failures.items())),
        hosts=results_db.run_hosts(conn, run_id),
        workloads=summary["workloads"],
    )
    if best is None:
        return data
    return ReportData(
        **{
            **data.__dict__,
            "launch_command": launch.launch_command(best.result),
            "launch_command_multiline": launch.launch_command(best.result, multiline=True),
            "host_vars": launch.host_vars_snippet(best.result, run_id=run_id),
        }
    )


def _row_order(row: Row, objective: dict[str, Any]) -> tuple[Any, ...]:
    # ok results first, best objective first; then failures by class.
    sign = -1.0 if objective["goal"] == "max" else 1.0
    value = sign * row.objective if row.objective is not None else float("inf")
    return (row.status != "ok", value if row.status == "ok" else 0.0, row.status, row.host, row.id)


def _varying_flags(results: list[dict[str, Any]]) -> list[str]:
    names = sorted({name for r in results for name in r["flags"]})
    return [n for n in names if len({repr(r["flags"].get(n)) for r in results}) > 1]


def _label(flags: dict[str, Any], varying: list[str]) -> str:
    parts = []
    for name in varying:
        if name not in flags:
            continue
        value = flags[name]
        parts.append(name if value is True else f"{name}={value}")
    return " ".join(parts) or "(base flags)"


def _row(
    result: dict[str, Any], objective: dict[str, Any], varying: list[str], best_key: tuple[str, str] | None
) -> Row:
    ci = result.get("objective_ci95")
    reps = regression.objective_repetitions(result, objective)
    if ci is None and len(reps) >= 2:
        ci = regression.mean_ci95(reps)
    return Row(
        id=result["id"],
        host=result["host"],
        status=result["status"],
        label=_label(result["flags"], varying),
        objective=result.get("objective"),
        ci95=(ci[0], ci[1]) if ci else None,
        repetitions=len(reps),
        is_best=(result["host"], result["id"]) == best_key,
        result=result,
    )


def decode_rate(values: dict[str, Any]) -> float | None:
    if values.get(DECODE_RATE) is not None:
        return float(values[DECODE_RATE])
    tpot = values.get("mean_tpot_ms") or values.get("median_tpot_ms")
    return 1000.0 / float(tpot) if tpot else None


def _pareto(rows: list[Row]) -> list[ParetoPoint]:
    raw: list[tuple[str, Row, float, float]] = []
    for row in rows:
        if row.status != "ok":
            continue
        for workload, block in sorted(row.result["metrics"].items()):
            values = block.get("values") or {}
            rate, tput = decode_rate(values), values.get(THROUGHPUT)
            if rate is not None and tput is not None:
                raw.append((workload, row, rate, float(tput)))
    points = []
    for workload, row, rate, tput in raw:
        dominated = any(
            w == workload and r2 >= rate and t2 >= tput and (r2 > rate or t2 > tput) for w, _, r2, t2 in raw
        )
        points.append(ParetoPoint(workload, row.id, row.host, row.label, rate, tput, not dominated))
    return points
