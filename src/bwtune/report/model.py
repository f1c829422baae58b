"""Everything a report shows about one run, gathered from the results database once."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import regression, store
from bwtune.analysis import capacity as capacity_view
from bwtune.analysis import pareto as latency_pareto
from bwtune.analysis import speculative as spec_view
from bwtune.report import launch

SIMULATED_LABEL = "SIMULATED (bwtune stand-in)"
# Per-request decode rate: reported directly, else derived from the time per output token.
DECODE_RATE = "output_tok_s_per_request"
THROUGHPUT = "output_throughput"
# The longest bar-chart detail line; longer labels shorten each value, never the differing end.
LABEL_MAX = 58
# A run with more results than FULL_REPORT_MAX gets a paged report (issue 21 #15): its top
# REPORT_TOP ok configs by the objective, the first REPORT_PER_STATUS of every other status,
# and the counts of all; the rest is in `bwtune export`.
FULL_REPORT_MAX = 500
REPORT_TOP = 100
REPORT_PER_STATUS = 10


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
    short_label: str = ""  # the values of the varying axes only, for narrow places (bar chart)
    tied_with_best: bool = False  # its 95% CI overlaps the winner's: not told apart by this run
    # A config launched more than once on its stack: each launch oldest first (the --json
    # result's objective_launches); `objective` is then their mean, what the ranking used.
    launches: tuple[dict[str, Any], ...] = ()
    # Earlier launches of this config on this host that failed (a re-measure, a repetition of
    # `bwtune regress`): never in its value, always told beside it. Each: attempt, status,
    # message, log_tail, log_path.
    failed_launches: tuple[dict[str, Any], ...] = ()

    @property
    def launches_caption(self) -> str:
        """The caption of a re-measured config's value ("mean of 7 launches; crashed 1 more"),
        else empty."""
        parts = [f"mean of {len(self.launches)} launches"] if self.launches else []
        if self.failed_launches:
            parts.append(f"{failed_counts(self.failed_launches)} more (not in the value)")
        return "; ".join(parts)


@dataclass(frozen=True)
class ParetoPoint:
    """One ok config on one workload of the per-user speed / throughput per GPU chart
    (analysis.pareto.speed_fronts): on_frontier when no other point of its workload is at
    least as fast per user and serves at least as much per GPU, better on one."""

    workload: str
    id: str
    host: str
    label: str
    decode_rate: float  # per-user speed: output tok/s per request
    throughput: float  # output tok/s of the whole server
    on_frontier: bool
    gpus: int = 1  # the GPUs one server of the config uses (analysis.pareto.gpus_of)

    @property
    def per_gpu(self) -> float:  # output tok/s per GPU: what the chart draws
        return self.throughput / self.gpus


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
    failures: dict[str, list[Row]]  # launched configs that failed, by class
    hosts: list[dict[str, Any]]
    launch_command: str | None = None
    launch_command_multiline: str | None = None
    host_vars: str | None = None
    workloads: list[str] = field(default_factory=list)
    not_launched: dict[str, list[Row]] = field(default_factory=dict)  # pruned, duplicate
    label_axes: list[str] = field(default_factory=list)  # what short_label's values are
    resolution: list[str] = field(default_factory=list)  # what SGLang changes in the winner's argv
    regression: dict[str, Any] | None = None  # bwtune regress's analysis (regression_history.to_dict)
    # Earlier launches of re-measured configs that failed, oldest first (Row.failed_launches
    # of every row): the summary's `failed` counts current lines only.
    earlier_failures: list[tuple[Row, dict[str, Any]]] = field(default_factory=list)
    left_out: int = 0  # results of a big run the report does not show (FULL_REPORT_MAX)
    # Capacity workloads' searches (analysis.capacity.capacity_rows), highest first per workload.
    capacity: list[dict[str, Any]] = field(default_factory=list)
    # Throughput against a latency percentile, per workload (analysis.pareto.fronts).
    latency_fronts: list[dict[str, Any]] = field(default_factory=list)
    # Per-user speed against output tok/s per GPU, per workload (analysis.pareto.speed_fronts).
    speed_fronts: list[dict[str, Any]] = field(default_factory=list)
    # A `bwtune speculative` run (issue 26): per load speculative decoding off against on
    # (analysis.speculative.speculative_rows), and its link to the base run; else empty, None.
    speculative: list[dict[str, Any]] = field(default_factory=list)
    speculative_link: dict[str, Any] | None = None

    @property
    def speculative_conclusion(self) -> dict[str, Any] | None:
        return spec_view.conclusion(self.speculative)

    @property
    def left_out_text(self) -> str:
        """What a paged report shows and where the rest is ("" when it shows every result)."""
        if not self.left_out:
            return ""
        return (
            f"This run has {self.summary['results']:,} results: shown are the top {REPORT_TOP} ok configs "
            f"by the objective and the first {REPORT_PER_STATUS} of every other status "
            f"({len(self.rows):,} rows); {self.left_out:,} rows are left out. The counts cover every result. "
            f"Every row: bwtune export {self.run_id} --format csv (or --format json)."
        )

    @property
    def objective_text(self) -> str:
        o = self.objective
        return f"{o['goal']} {o['metric']} on {o.get('workload') or '(no workload)'}"

    @property
    def ties(self) -> list[Row]:
        """Other ok configs within the winner's noise."""
        return [r for r in self.rows if r.tied_with_best and not r.is_best]

    @property
    def plan_text(self) -> str:
        return plan_text(self.plan)


def load_report(conn: sqlite3.Connection, run_id: str, *, full_max: int | None = None) -> ReportData:
    """The report's data; a run with more than `full_max` (FULL_REPORT_MAX) results is
    paged: its top configs and the counts of all (left_out_text)."""
    total = store.result_count(conn, run_id)
    keys = None
    if total > (FULL_REPORT_MAX if full_max is None else full_max):
        keys = store.report_keys(conn, run_id, top=REPORT_TOP, per_status=REPORT_PER_STATUS)
    output = store.build_run_output(conn, run_id, keys)
    summary = output["summary"]
    objective = summary["objective"]
    best_key = (output["best"]["host"], output["best"]["id"]) if output["best"] else None
    varying = _varying_flags(output["results"])
    matrix_axes = list((store.get_run(conn, run_id).matrix or {}).get("axes") or {})
    axes = _varying_axes(output["results"], matrix_axes)
    earlier = _earlier_failures(conn, run_id)
    rows = [
        replace(
            _row(result, objective, varying, axes, best_key),
            failed_launches=tuple(earlier.get((result["host"], result["id"]), ())),
        )
        for result in output["results"]
    ]
    rows.sort(key=lambda r: _row_order(r, objective))
    best = next((r for r in rows if r.is_best), None)
    if best is not None:
        rows = [_mark_tie(row, best) for row in rows]
        best = next(r for r in rows if r.is_best)
    failures: dict[str, list[Row]] = {}
    not_launched: dict[str, list[Row]] = {}
    for row in rows:
        if contract.is_failed(row.status):
            failures.setdefault(row.status, []).append(row)
        elif not contract.is_launched(row.status):
            not_launched.setdefault(row.status, []).append(row)
    speed_fronts = latency_pareto.speed_fronts(output)
    data = ReportData(
        run_id=run_id,
        created_at=summary["created_at"],
        objective=objective,
        summary=summary,
        plan=summary.get("plan"),
        simulated=summary["simulated"],
        rows=rows,
        best=best,
        pareto=_pareto(rows, speed_fronts),
        failures=dict(sorted(failures.items())),
        hosts=store.run_hosts(conn, run_id),
        workloads=summary["workloads"],
        not_launched=dict(sorted(not_launched.items())),
        label_axes=axes,
        earlier_failures=[(row, failed) for row in rows for failed in row.failed_launches],
        left_out=int(summary.get("left_out") or 0),
        capacity=capacity_view.capacity_rows(output["results"], simulated=summary["simulated"]),
        latency_fronts=latency_pareto.fronts(output),
        speed_fronts=speed_fronts,
    )
    link = spec_view.read_link(store.run_dir(run_id))
    if link is not None:
        data = replace(data, speculative=spec_view.speculative_rows(output), speculative_link=link)
    if best is None:
        return data
    return replace(
        data,
        launch_command=launch.launch_command(best.result),
        launch_command_multiline=launch.launch_command(best.result, multiline=True),
        host_vars=launch.host_vars_snippet(best.result, run_id=run_id),
        resolution=launch.resolution(best.result),
    )


def _earlier_failures(conn: sqlite3.Connection, run_id: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(host, config id) -> its superseded launches that failed, oldest first."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in store.superseded_results(conn, run_id):
        if not contract.is_failed(line.get("status")):
            continue
        failure = line.get("failure") or {}
        found.setdefault((str(line["host"]), str(line["config_id"])), []).append(
            {
                "attempt": line.get("attempt"),
                "status": line["status"],
                "message": failure.get("message") or "",
                "log_tail": list(failure.get("log_tail") or []),
                "log_path": failure.get("log_path"),
            }
        )
    return found


def failed_counts(failed: Sequence[dict[str, Any]]) -> str:
    """ "crashed 1, oom 2" for failed launches."""
    counts: dict[str, int] = {}
    for one in failed:
        counts[str(one["status"])] = counts.get(str(one["status"]), 0) + 1
    return ", ".join(f"{name} {n}" for name, n in counts.items())


def _row_order(row: Row, objective: dict[str, Any]) -> tuple[Any, ...]:
    # ok results first, best objective first; then failures by class; plan rows last.
    sign = -1.0 if objective["goal"] == "max" else 1.0
    value = sign * row.objective if row.objective is not None else float("inf")
    group = 0 if row.status == "ok" else (1 if contract.is_launched(row.status) else 2)
    return (group, value if row.status == "ok" else 0.0, row.status, row.host, row.id)


def _mark_tie(row: Row, best: Row) -> Row:
    tied = row.status == "ok" and (row is best or contract.intervals_overlap(row.ci95, best.ci95))
    return replace(row, tied_with_best=tied)


def _varying_flags(results: list[dict[str, Any]]) -> list[str]:
    names = sorted({name for r in results for name in r["flags"]})
    return [n for n in names if len({repr(r["flags"].get(n)) for r in results}) > 1]


def _varying_axes(results: list[dict[str, Any]], order: list[str]) -> list[str]:
    """The matrix axes whose values differ between results, in the matrix's axis order."""
    names: list[str] = [name for name in order if isinstance(name, str)]
    for result in results:
        names.extend(name for name in result.get("point") or {} if name not in names)
    return [n for n in names if len({repr((r.get("point") or {}).get(n)) for r in results}) > 1]


def _label(flags: dict[str, Any], varying: list[str]) -> str:
    parts = []
    for name in varying:
        if name not in flags:
            continue
        value = flags[name]
        parts.append(name if value is True else f"{name}={value}")
    return " ".join(parts) or "(base flags)"


def short_label(values: list[str], limit: int = LABEL_MAX) -> str:
    """Values joined by " · "; when too long, each value loses its middle (never its ends), so
    labels that differ only at a value's end stay apart."""
    text = " · ".join(values)
    if len(text) <= limit or not values:
        return text
    budget = max((limit - 3 * (len(values) - 1)) // len(values), 5)
    return " · ".join(v if len(v) <= budget else v[: budget - 1 - budget // 2] + "…" + v[-(budget // 2) :]
                      for v in values)  # fmt: skip


def _axis_value(value: Any) -> str:
    if value is True:
        return "on"
    if value is False:
        return "off"
    return "\u2013" if value is None else str(value)  # en dash: the axis is not set for this config


def _row(
    result: dict[str, Any],
    objective: dict[str, Any],
    varying: list[str],
    axes: list[str],
    best_key: tuple[str, str] | None,
) -> Row:
    ci = result.get("objective_ci95")
    launches = tuple(result.get("objective_launches") or ())
    reps = regression.objective_repetitions(result, objective)
    if ci is None and len(reps) >= 2:
        ci = contract.mean_ci95(reps)[1]
    repetitions = sum(int(n["repetitions"]) for n in launches) if launches else len(reps)
    point = result.get("point") or {}
    label = _label(result["flags"], varying)
    return Row(
        id=result["id"],
        host=result["host"],
        status=result["status"],
        label=label,
        objective=result.get("objective"),
        ci95=(ci[0], ci[1]) if ci else None,
        repetitions=repetitions,
        is_best=(result["host"], result["id"]) == best_key,
        result=result,
        short_label=short_label([_axis_value(point.get(a)) for a in axes]) if axes else short_label([label]),
        launches=launches,
    )


def launches_text(row: Row, fmt: Callable[[float | None], str]) -> str:
    """Each launch's value of a re-measured config, oldest first ("" for one measured once):
    "mean of 2 launches: attempt 1: 1,200.0; attempt 2: 1,269.0"."""
    if not row.launches:
        return ""
    each = "; ".join(f"attempt {n['attempt']}: {fmt(n['value'])}" for n in row.launches)
    failed = "".join(
        f"; attempt {f['attempt']}: {f['status']} (not in the value)" for f in row.failed_launches
    )
    return f"mean of {len(row.launches)} launches: {each}{failed}"


# The cold-start columns a report shows, in phase order: (results line key, caption).
COLD_START_COLUMNS = (
    ("process_to_listen_s", "port listening"),
    ("to_health_s", "/health ok"),
    ("to_ready_s", "ready (launch to ready)"),
    ("to_first_token_s", "first token"),
    ("failed_after_s", "failed after"),
)
COLD_START_NOTE = (
    "Seconds from the server process's start (monotonic clock) to each phase; a dash: not "
    "reached. Ready: /health_generate and an authenticated route answered, when the sweep "
    "starts the correctness gate; first token: the gate's first answer. Launches of older "
    "bwtune releases did not record it."
)


def cold_start_rows(data: ReportData) -> list[tuple[Row, dict[str, Any]]]:
    """The launched configs that recorded their cold start, in the report's row order."""
    return [
        (row, row.result["cold_start"])
        for row in data.rows
        if contract.is_launched(row.status) and isinstance(row.result.get("cold_start"), dict)
    ]


def plan_text(plan: dict[str, Any] | None) -> str:
    """The plan summary as one readable line (the node's sweep summary or the planner's)."""
    if not plan:
        return "not recorded"
    parts = []
    for key, caption in _PLAN_FIELDS:
        value = plan.get(key)
        if value is None or isinstance(value, dict | list):
            continue
        parts.append(f"{caption} {value}" if key == "strategy" else f"{value} {caption}")
    return ", ".join(parts) or "not recorded"


# (key, caption) in the order a reader wants them; other keys are shown elsewhere or internal.
_PLAN_FIELDS = (
    ("strategy", "strategy"),
    ("combinations", "combinations"),
    ("points", "matrix points"),
    ("planned_configs", "configs planned"),
    ("expanded", "configs planned"),
    ("valid_configs", "valid"),
    ("valid", "valid"),
    ("pruned", "pruned by the rules"),
    ("duplicates", "duplicates"),
    ("duplicate", "duplicates"),
    ("launches", "launches"),
    ("resumed", "resumed from an earlier attempt"),
    ("saved_launches", "launches saved by the strategy"),
    ("screened_out", "screened out"),
)


def decode_rate(values: dict[str, Any]) -> float | None:
    if values.get(DECODE_RATE) is not None:
        return float(values[DECODE_RATE])
    tpot = values.get("mean_tpot_ms") or values.get("median_tpot_ms")
    return 1000.0 / float(tpot) if tpot else None


def _pareto(rows: list[Row], speed_fronts: list[dict[str, Any]]) -> list[ParetoPoint]:
    """The chart's points: the report's ok rows on each workload's speed front (computed
    over every ok result of the run), in the rows' order."""
    by_key = {(front["workload"], p["host"], p["id"]): p for front in speed_fronts for p in front["points"]}
    points = []
    for row in rows:
        if row.status != "ok":
            continue
        for workload in sorted(row.result["metrics"]):
            p = by_key.get((workload, row.host, row.id))
            if p is not None:
                points.append(ParetoPoint(workload, row.id, row.host, row.label, p["per_user"],
                                          p["throughput"], p["on_front"], p["gpus"]))  # fmt: skip
    return points
