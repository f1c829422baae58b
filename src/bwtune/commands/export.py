"""`bwtune export`: one run's results as CSV (one row per measurement) or JSON."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import exit_codes, store
from bwtune.analysis import capacity, pareto

NAME = "export"
HELP = "Export a run: CSV with one row per measurement and repetition, or the JSON of `--json` output."
CSV_COLUMNS = (
    "run_id",
    "host",
    "config_id",
    "attempt",
    "status",
    "simulated",
    # Then one column per flag of the run's configs (`--name`): see to_csv.
    "workload",
    "metric",
    "repetition",
    "value",
    # 1/0 on an ok result's rows of a workload: on that workload's throughput/latency Pareto
    # front (analysis.pareto) for each latency percentile; empty for other results.
    *(f"on_front_{latency}" for latency in pareto.LATENCIES),
    # 1/0 on a capacity workload's rows: the search never failed ("capacity at least X").
    "capacity_lower_bound",
    # The launch's cold start, one column per field (seconds; empty where null or not recorded).
    *(f"cold_start_{name}" for name in contract.COLD_START_SECONDS),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--format", choices=("csv", "json"), default="csv", help="csv (the default) or json")
    parser.add_argument(
        "--json", action="store_true", help="the same as --format json (every command's spelling)"
    )
    parser.add_argument("-o", "--output", metavar="PATH", type=Path, help="write here instead of stdout")
    store.add_db_argument(parser)


def run(args: argparse.Namespace) -> int:
    try:
        conn = store.connect_readonly(args.db)  # a reading command never creates or changes one
        store.print_notice(conn, "bwtune export")
        try:
            output = store.build_run_output(conn, args.run_id)
            output["superseded"] = store.superseded_results(conn, args.run_id)
            # The analyses `bwtune report` shows, from the same results (simulated flagged).
            output["capacity"] = capacity.capacity_rows(
                output["results"], simulated=output["summary"]["simulated"]
            )
            output["pareto_fronts"] = pareto.fronts(output)
        finally:
            conn.close()
    except (store.UnknownRunError, store.SchemaTooNewError, *store.DB_INPUT_ERRORS) as err:
        print(f"bwtune export: {_message(err)}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    as_json = args.json or args.format == "json"
    text = json.dumps(output, indent=2) + "\n" if as_json else to_csv(output)
    if args.output is None:
        sys.stdout.write(text)
        return exit_codes.OK
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as err:
        print(f"bwtune export: cannot write {args.output}: {err.strerror}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    return exit_codes.OK


def _message(err: Exception) -> str:
    return err.args[0] if isinstance(err, LookupError) and err.args else str(err)


def to_csv(output: dict[str, Any]) -> str:
    """Long format: each repetition of each metric of each workload; failures get one row.

    Earlier measurements of a re-measured config (`superseded`) come first, each row with
    its attempt number, so no measurement is missing from an export. Each row carries its
    config's flags, one column per flag any config of the run sets (`--name`, as SGLang
    spells it; empty where a config leaves it unset), and its launch's cold start (the same
    on every row of a launch).
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    earlier = [{**line, "id": line["config_id"]} for line in output.get("superseded") or []]
    every = [*earlier, *output["results"]]
    flags = sorted({name for result in every for name in (result.get("flags") or {})})
    fixed = CSV_COLUMNS.index("workload")
    writer.writerow([*CSV_COLUMNS[:fixed], *(f"--{name}" for name in flags), *CSV_COLUMNS[fixed:]])
    on_front = _front_membership(output)
    for result in every:
        base: tuple[Any, ...] = (output["run_id"], result["host"], result["id"], result.get("attempt", 1),
                                 result["status"], int(bool(result["simulated"])))  # fmt: skip
        own = result.get("flags") or {}
        base += tuple(_flag_cell(own[name]) if name in own else "" for name in flags)
        cold = _cold_start_cells(result.get("cold_start"))
        current = "superseded_at" not in result  # an earlier measurement is on no front
        rows: list[tuple[Any, ...]] = [
            (*base, workload, metric, index, value,
             *_front_cells(on_front, result, workload, current), _lower_bound_cell(block), *cold)
            for workload, block in sorted(result["metrics"].items())
            for index, repetition in enumerate(block.get("repetitions") or [])
            for metric, value in sorted(repetition.items())
        ]  # fmt: skip
        empty = ("",) * (len(pareto.LATENCIES) + 1)
        writer.writerows(rows or [(*base, "", "", "", "", *empty, *cold)])
    return buffer.getvalue()


def _front_membership(output: dict[str, Any]) -> dict[tuple[str, str], dict[tuple[str, str], bool]]:
    """(workload, latency) -> (host, config id) -> on that front, for the run's ok results."""
    fronts = output.get("pareto_fronts")
    if fronts is None:
        fronts = pareto.fronts(output)
    return {
        (front["workload"], front["latency_metric"]): {
            (p["host"], p["id"]): p["on_front"] for p in front["points"]
        }
        for front in fronts
    }


def _front_cells(
    on_front: dict[tuple[str, str], dict[tuple[str, str], bool]],
    result: dict[str, Any],
    workload: str,
    current: bool,
) -> tuple[Any, ...]:
    """1/0 per latency percentile where the result is a point of that front, else empty."""
    cells: list[Any] = []
    for latency in pareto.LATENCIES:
        member = (
            on_front.get((workload, latency), {}).get((result["host"], result["id"])) if current else None
        )
        cells.append("" if member is None else int(member))
    return tuple(cells)


def _lower_bound_cell(block: Any) -> Any:
    found = block.get("capacity") if isinstance(block, dict) else None
    return int(bool(found.get("lower_bound"))) if isinstance(found, dict) else ""


def _flag_cell(value: Any) -> str:
    """A flag's value as the matrix writes it: true/false, a list or mapping as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _cold_start_cells(block: Any) -> tuple[Any, ...]:
    """A line's cold-start seconds in COLD_START_SECONDS order; empty for null, and for every
    field of a line without one (older nodes, launches that never started)."""
    block = block if isinstance(block, dict) else {}
    return tuple("" if block.get(name) is None else block[name] for name in contract.COLD_START_SECONDS)
