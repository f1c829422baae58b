"""`bwtune sweep`: run a sweep matrix on every host of an inventory, keep and report the results."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils.catalog import CatalogError
from ansible_collections.bwtune.sglang.plugins.module_utils.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils.planner import plan
from bwtune import matrix_file, report, results_db, runner
from bwtune.progress import ProgressView, SweepState

NAME = "sweep"
HELP = "Run a sweep matrix on the inventory's hosts, keep the results and write the reports."

EXIT_OK, EXIT_HOST_FAILED, EXIT_BAD_INPUT, EXIT_CANCELED = 0, 1, 2, 130
SWEEP_PLAYBOOK, CANCEL_PLAYBOOK = "sweep.yml", "sweep_cancel.yml"
FOLLOW_TASK = "Follow the sweep"
STRATEGIES = results_contract.STRATEGIES
AUTO_NEEDS_FACTS = "is auto but no facts give it"


class BadInput(ValueError):
    """Bad user input: one line, exit 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--inventory", required=True, help="Ansible inventory (file or directory)")
    parser.add_argument("-m", "--matrix", help="sweep matrix (YAML); with --resume, defaults to the run's")
    parser.add_argument("--limit", help="only these hosts (an Ansible host pattern)")
    parser.add_argument("--strategy", choices=STRATEGIES, default="grid", help="how configs are chosen")
    parser.add_argument("--resume", metavar="RUN_ID", help="continue this run: configs done are kept")
    parser.add_argument("--force", action="store_true", help="launch configs the rules would prune")
    parser.add_argument("--forks", type=int, help="hosts Ansible works on at once")
    parser.add_argument("--node-results-dir", help="where nodes keep results files (default: the playbook's)")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    try:
        request = SweepRequest.from_args(args)
    except (BadInput, runner.InventoryError) as exc:
        print(f"bwtune: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    outcome = run_sweep(request)
    print_outcome(outcome, as_json=args.json)
    return outcome.exit_code


@dataclass
class SweepRequest:
    inventory: runner.Inventory
    matrix: dict[str, Any]
    matrix_source: str
    run_id: str
    limit: str | None = None
    strategy: str = "grid"
    force: bool = False
    forks: int | None = None
    node_results_dir: str | None = None
    quiet: bool = False
    resumed: bool = False
    node_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SweepRequest:
        inventory = runner.load_inventory(args.inventory, args.limit)
        if args.resume:
            _check_run_id(args.resume)
        if args.matrix:
            matrix = load_matrix(args.matrix)
            source = str(args.matrix)
        elif args.resume:
            saved = results_db.run_dir(args.resume) / "matrix.json"
            if not saved.is_file():
                raise BadInput(f"--resume {args.resume}: no matrix saved for that run; give -m MATRIX")
            matrix, source = json.loads(saved.read_text(encoding="utf-8")), str(saved)
        else:
            raise BadInput("give a matrix with -m MATRIX (or --resume RUN_ID)")
        return cls(
            inventory=inventory,
            matrix=matrix,
            matrix_source=source,
            run_id=args.resume or runner.new_run_id(),
            limit=args.limit,
            strategy=args.strategy,
            force=args.force,
            forks=args.forks,
            node_results_dir=args.node_results_dir,
            quiet=args.quiet,
            resumed=bool(args.resume),
        )

    def extravars(self) -> dict[str, Any]:
        extravars: dict[str, Any] = {
            "bwtune_matrix": self.matrix,
            "bwtune_run_id": self.run_id,
            "bwtune_sweep_strategy": self.strategy,
            "bwtune_sweep_force": self.force,
        }
        if self.node_results_dir:
            extravars["bwtune_sweep_results_dir"] = self.node_results_dir
        if self.node_env:
            extravars["bwtune_sweep_env"] = self.node_env
        return extravars


@dataclass
class SweepOutcome:
    run_id: str
    exit_code: int
    output: dict[str, Any] | None = None  # the --json shape, from the results database
    messages: list[str] = field(default_factory=list)  # one line each, for stderr
    reports: list[Path] = field(default_factory=list)


def load_matrix(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and plan a matrix on the controller; BadInput names the file, line and key.

    A matrix with `gpu: auto` or `version: auto` is planned again on each node with its
    facts; here it is checked as far as it can be without them.
    """
    try:
        matrix = matrix_file.load(Path(path).expanduser())
    except matrix_file.MatrixFileError as err:
        raise BadInput(str(err)) from None
    if not isinstance(matrix.data, dict):
        raise BadInput(f"{matrix.path}: a matrix is a mapping, not {type(matrix.data).__name__}")
    try:
        plan(matrix.data)
    except MatrixError as err:
        if AUTO_NEEDS_FACTS not in err.message:
            raise BadInput(f"{matrix.where(err.path)}: {err}") from None
    except CatalogError as err:
        raise BadInput(f"{matrix.path}: {err}") from None
    return dict(matrix.data)


def run_sweep(request: SweepRequest) -> SweepOutcome:
    """Run the sweep playbook, follow it, import what it returned and write the reports."""
    pdd = runner.private_data_dir(request.run_id)
    (pdd.parent / "matrix.json").write_text(json.dumps(request.matrix, indent=1), encoding="utf-8")
    hosts = request.inventory.hosts
    state = SweepState.for_hosts({host: request.inventory.simulated(host) for host in hosts})
    verb = "resuming" if request.resumed else "sweeping"
    title = f"bwtune: {verb} run {request.run_id} on {len(hosts)} host(s)"
    envvars = dict(request.node_env)
    with runner.cancel_on_interrupt() as cancel, ProgressView(state, title, quiet=request.quiet) as view:
        playbook_run = runner.run_playbook(
            SWEEP_PLAYBOOK,
            request.inventory,
            request.extravars(),
            limit=request.limit,
            forks=request.forks,
            private_data_dir=pdd,
            on_event=view.on_event,
            quiet=True,
            cancel=cancel.event,
            envvars=envvars,
        )
        if playbook_run.canceled:
            view.note(f"bwtune: cancelling run {request.run_id}: stopping the sweep on the nodes")
    if playbook_run.canceled:
        return _cancel(request, pdd)
    return _collect(request, playbook_run)


def _cancel(request: SweepRequest, pdd: Path) -> SweepOutcome:
    extravars: dict[str, Any] = {"bwtune_run_id": request.run_id}
    if request.node_results_dir:
        extravars["bwtune_sweep_results_dir"] = request.node_results_dir
    stop = runner.run_playbook(
        CANCEL_PLAYBOOK, request.inventory, extravars, limit=request.limit, private_data_dir=pdd, quiet=True
    )
    messages = [failure.line() for failure in stop.failures.values()]
    if stop.error:
        messages.append(f"cancel playbook: {stop.error}")
    stopped = sorted(set(stop.hosts) - set(stop.failures))
    messages.append(f"cancelled run {request.run_id}; stopped on: {', '.join(stopped) or 'no host'}")
    messages.append(f"resume with: bwtune sweep -i {request.inventory.path} --resume {request.run_id}")
    return SweepOutcome(request.run_id, EXIT_CANCELED, messages=messages)


def _collect(request: SweepRequest, playbook_run: runner.PlaybookRun) -> SweepOutcome:
    messages = [failure.line() for failure in playbook_run.failures.values()]
    if playbook_run.error:
        messages.append(f"the sweep playbook did not run: {playbook_run.error}")
    by_host = node_results(playbook_run)
    lines: list[dict[str, Any]] = []
    for host, result in sorted(by_host.items()):
        if result.get("error"):
            messages.append(f"host {host}: {result['error']}")
        for number, line in enumerate(result.get("results") or [], start=1):
            # The inventory name, not the node's own hostname: two inventory hosts on one
            # machine stay apart, and the database matches the inventory.
            line = {**line, "host": host} if isinstance(line, dict) else line
            try:
                results_db.validate_result(line, f"{host} result {number}")
            except results_db.ResultsFormatError as exc:
                messages.append(str(exc))
                continue
            lines.append(line)
    conn = results_db.connect()
    try:
        results_db.record_run(
            conn, request.run_id, matrix=request.matrix, plan_summary=_plan_summary(by_host) or None
        )
        results_db.import_results(conn, lines, run_id=request.run_id)
        output = results_db.build_run_output(conn, request.run_id)
        reports = write_reports(conn, request.run_id)
    finally:
        conn.close()
    failed = (
        bool(playbook_run.failures) or playbook_run.rc != 0 or any(r.get("error") for r in by_host.values())
    )
    code = EXIT_HOST_FAILED if failed else EXIT_OK
    return SweepOutcome(request.run_id, code, output=output, messages=messages, reports=reports)


def node_results(playbook_run: runner.PlaybookRun) -> dict[str, dict[str, Any]]:
    """host -> what the node's sweep returned ({results, best, summary} or {error})."""
    found: dict[str, dict[str, Any]] = {}
    stats = playbook_run.artifact_data.get("bwtune_sweep")
    if isinstance(stats, Mapping):
        found.update({str(h): dict(r) for h, r in stats.items() if isinstance(r, Mapping)})
    for host, res in playbook_run.results("sweep_progress", task=FOLLOW_TASK).items():
        if isinstance(res.get("result"), Mapping):
            found[host] = dict(res["result"])
    return found


def _plan_summary(by_host: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    for result in by_host.values():
        summary = result.get("summary")
        if isinstance(summary, Mapping):
            return dict(summary)
    return {}


def write_reports(conn: Any, run_id: str) -> list[Path]:
    """report.html and report.md in the run directory."""
    directory = results_db.run_dir(run_id)
    html, markdown = directory / "report.html", directory / "report.md"
    report.write_report(conn, run_id, html_path=html, md_path=markdown)
    return [html, markdown]


def print_outcome(outcome: SweepOutcome, as_json: bool, stream: Any = None) -> None:
    out = stream if stream is not None else sys.stdout
    for message in outcome.messages:
        print(f"bwtune: {message}", file=sys.stderr)
    if outcome.output is None:
        return
    if as_json:
        print(json.dumps(outcome.output, indent=2, sort_keys=False), file=out)
        return
    print_results_table(outcome.output, out)
    for path in outcome.reports:
        print(f"report: {path}", file=out)


def print_results_table(output: Mapping[str, Any], out: Any) -> None:
    """One row per config: best first, then the other measured ones, then the failures."""
    from rich.console import Console
    from rich.table import Table

    summary = output.get("summary") or {}
    objective = summary.get("objective") or {}
    metric = objective.get("metric", "objective")
    goal = objective.get("goal", "max")
    simulated = summary.get("simulated")
    results = list(output.get("results") or [])
    axes = sorted({axis for result in results for axis in (result.get("point") or {})})
    hosts = {result.get("host") for result in results}
    title = f"run {output.get('run_id')}" + ("  SIMULATED: bwtune stand-in, not a GPU" if simulated else "")
    table = Table(title=title, title_justify="left")
    host_column = ["host"] if len(hosts) > 1 else []
    columns = ["config", *host_column, *axes, "status", f"{metric} ({goal})", "95% CI"]
    for column in columns:
        table.add_column(column, overflow="fold")
    best = output.get("best") or {}

    def order(result: Mapping[str, Any]) -> tuple[int, float]:
        value = result.get("objective")
        if value is None:
            return (1, 0.0)
        return (0, -value if goal == "max" else value)

    for result in sorted(results, key=order):
        is_best = bool(best) and result.get("id") == best.get("id") and result.get("host") == best.get("host")
        value, ci = result.get("objective"), result.get("objective_ci95")
        point = result.get("point") or {}
        table.add_row(
            f"{result.get('id')}{' *' if is_best else ''}",
            *([str(result.get("host"))] if len(hosts) > 1 else []),
            *(str(point.get(axis, "")) for axis in axes),
            _status_text(result),
            "" if value is None else f"{value:.1f}",
            "" if not ci else f"{ci[0]:.1f} .. {ci[1]:.1f}",
            style="bold" if is_best else None,
        )
    # A file or pipe gets the whole table unwrapped; a terminal gets its own width.
    console = Console(file=out, width=None if Console(file=out).is_terminal else 200)
    console.print(table)
    if best:
        note = " (simulated)" if simulated else ""
        value = best.get("objective")
        shown = "" if value is None else f": {value:.1f} {metric}"
        console.print(f"best: {best.get('id')} on {best.get('host')}{shown}{note}")


def _status_text(result: Mapping[str, Any]) -> str:
    """The status, with the short why of a row that never launched."""
    status = str(result.get("status"))
    reasons = result.get("reasons") or []
    if status == "pruned" and reasons:
        return f"pruned ({reasons[0].get('kind')}: {reasons[0].get('rule')})"
    message = (result.get("failure") or {}).get("message")
    if status == "duplicate" and message:
        return f"duplicate: {message}"
    return status


def _check_run_id(run_id: str) -> None:
    try:
        results_contract.check_run_id(run_id, "--resume")
    except ValueError as exc:
        raise BadInput(str(exc)) from None
