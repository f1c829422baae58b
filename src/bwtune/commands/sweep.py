"""`bwtune sweep`: run a sweep matrix on every host of an inventory, keep and report the results."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract as contract
from ansible_collections.bwtune.sglang.plugins.module_utils.catalog import CatalogError
from ansible_collections.bwtune.sglang.plugins.module_utils.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils.planner import plan
from bwtune import console, exit_codes, matrix_file, report, results_db, run_settings, runner
from bwtune.commands import _playbook_options as playbook_options
from bwtune.progress import ProgressView, SweepState

NAME = "sweep"
HELP = "Run a sweep matrix on the inventory's hosts, keep the results and write the reports."

SWEEP_PLAYBOOK, CANCEL_PLAYBOOK, ATTACH_PLAYBOOK = "sweep.yml", "sweep_cancel.yml", "sweep_attach.yml"
FOLLOW_TASK = "Follow the sweep"
STRATEGIES = contract.STRATEGIES
AUTO_NEEDS_FACTS = "is auto but no facts give it"
# Where a node keeps its results files unless its inventory says otherwise (the sweep role's default).
NODE_RESULTS_DIR = "~/.local/share/bwtune/sweeps"


class BadInput(ValueError):
    """Bad user input: one line, exit 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    playbook_options.add_arguments(parser, inventory_required=False)
    parser.add_argument("-m", "--matrix", help="sweep matrix (YAML); with --resume/--attach, the run's own")
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        help="how configs are chosen (default adaptive; a resume keeps the run's); adaptive starts from "
        "what earlier runs of the same GPU measured (the results database)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--resume", metavar="RUN_ID", help="continue this run with its own settings: configs done are kept"
    )
    which.add_argument(
        "--attach",
        metavar="RUN_ID",
        help="follow this run while its nodes still sweep (after the bwtune that started it was killed), "
        "then keep its results; starts nothing",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --resume: measure again the configs the run has already measured; "
        "the database keeps the earlier measurements and bwtune lists what it replaced",
    )
    parser.add_argument(
        "--node-results-dir", help="where nodes keep results files (default: the sweep role's)"
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    try:
        request = SweepRequest.from_args(args)
        results_db.check_writable()  # before anything runs: a sweep's results need a home
    except (
        BadInput,
        runner.InventoryError,
        playbook_options.ExtraVarsError,
        results_db.StorageError,
    ) as exc:
        print(f"bwtune: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    outcome = attach(request) if args.attach else run_sweep(request)
    print_outcome(outcome, as_json=args.json)
    return outcome.exit_code


@dataclass
class SweepRequest:
    inventory: runner.Inventory
    matrix: dict[str, Any]
    matrix_source: str
    run_id: str
    command: str = "sweep"  # how a resume is spelt: "sweep" or "demo"
    limit: str | None = None
    strategy: str = contract.DEFAULT_STRATEGY
    force: bool = False
    forks: int | None = None
    node_results_dir: str | None = None
    quiet: bool = False
    resumed: bool = False
    node_env: dict[str, str] = field(default_factory=dict)
    # adaptive's prior (the sweep module's `prior`): read from the results database by run_sweep.
    prior: list[dict[str, Any]] = field(default_factory=list)
    extra_vars: list[str] = field(default_factory=list)  # -e values, checked
    verbosity: int = 0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SweepRequest:
        extra_vars = playbook_options.check_extra_vars(args.extra_vars)
        run_id = args.resume or args.attach
        saved = None
        if run_id:
            saved = load_settings(run_id, "--resume" if args.resume else "--attach")
        inventory_path = args.inventory or (saved.inventory if saved else None)
        if not inventory_path:
            raise BadInput(
                f"give an inventory with -i INVENTORY (run {run_id} kept none)"
                if run_id
                else ("give an inventory with -i INVENTORY")
            )
        limit = args.limit if args.limit is not None else (saved.limit if saved else None)
        inventory = runner.load_inventory(inventory_path, limit)
        if args.matrix:
            matrix, source = load_matrix(args.matrix), str(args.matrix)
        elif run_id:
            matrix, source = saved_matrix(run_id, "--resume" if args.resume else "--attach")
        else:
            raise BadInput("give a matrix with -m MATRIX (or --resume RUN_ID)")
        if args.extra_vars is None and saved is not None:
            extra_vars = playbook_options.check_extra_vars(saved.extra_vars)
        return cls(
            inventory=inventory,
            matrix=matrix,
            matrix_source=source,
            run_id=run_id or runner.new_run_id(),
            command=saved.command if saved else NAME,
            limit=limit,
            strategy=args.strategy or (saved.strategy if saved else None) or contract.DEFAULT_STRATEGY,
            force=args.force,
            forks=args.forks if args.forks is not None else (saved.forks if saved else None),
            node_results_dir=args.node_results_dir or (saved.node_results_dir if saved else None),
            quiet=args.quiet,
            resumed=bool(run_id),
            node_env=dict(saved.node_env) if saved else {},
            extra_vars=extra_vars,
            verbosity=playbook_options.verbosity(args),
        )

    def extravars(self) -> dict[str, Any]:
        extravars: dict[str, Any] = {
            "sweep_matrix": self.matrix,
            "bwtune_run_id": self.run_id,
            "sweep_strategy": self.strategy,
            "sweep_force": self.force,
        }
        if self.node_results_dir:
            extravars["sweep_results_dir"] = self.node_results_dir
        if self.node_env:
            extravars["sweep_env"] = self.node_env
        if self.prior:
            extravars["sweep_prior"] = self.prior
        return extravars

    def run_extravars(self) -> dict[str, Any]:
        """What the cancel and attach playbooks need: the run and where its results are."""
        extravars: dict[str, Any] = {"bwtune_run_id": self.run_id}
        if self.node_results_dir:
            extravars["sweep_results_dir"] = self.node_results_dir
        return extravars

    def extra_args(self) -> list[str]:
        return playbook_options.extra_vars_args(self.extra_vars)

    def settings(self) -> run_settings.RunSettings:
        return run_settings.RunSettings(
            command=self.command,
            inventory=str(self.inventory.path),
            limit=self.limit,
            strategy=self.strategy,
            forks=self.forks,
            node_results_dir=self.node_results_dir,
            node_env=dict(self.node_env),
            extra_vars=list(self.extra_vars),
            matrix_source=self.matrix_source,
        )

    def resume_command(self) -> str:
        return self.settings().resume_command(self.run_id)

    def node_results_paths(self) -> dict[str, str]:
        """host -> its results file, as the sweep role finds it (for messages)."""
        paths = {}
        for host in self.inventory.hosts:
            folder = self.node_results_dir or self.inventory.hostvars[host].get("sweep_results_dir")
            paths[host] = f"{folder or NODE_RESULTS_DIR}/{self.run_id}/results.jsonl"
        return paths


def load_settings(run_id: str, flag: str) -> run_settings.RunSettings | None:
    try:
        contract.check_run_id(run_id, flag)
        return run_settings.load(run_id)
    except ValueError as err:
        raise BadInput(str(err)) from None


def saved_matrix(run_id: str, flag: str) -> tuple[dict[str, Any], str]:
    saved = results_db.run_dir(run_id) / "matrix.json"
    if not saved.is_file():
        if flag == "--attach":
            raise BadInput(
                f"--attach {run_id}: no such run started from here ({saved.parent} has no matrix.json)"
            )
        raise BadInput(f"{flag} {run_id}: no matrix saved for that run; give -m MATRIX")
    return json.loads(saved.read_text(encoding="utf-8")), str(saved)


@dataclass
class SweepOutcome:
    run_id: str
    exit_code: int
    output: dict[str, Any] | None = None  # the --json shape, from the results database
    messages: list[str] = field(default_factory=list)  # one line each, for stderr
    reports: list[Path] = field(default_factory=list)


def load_matrix(path: str | Path) -> dict[str, Any]:
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
    request.settings().save(request.run_id)
    request.prior = read_prior(request)
    verb = "resuming" if request.resumed else "sweeping"
    playbook_run = _follow(request, SWEEP_PLAYBOOK, request.extravars(), verb)
    if playbook_run.canceled:
        return _cancel(request, pdd)
    outcome = _collect(request, playbook_run)
    if request.resumed and outcome.exit_code == exit_codes.HOST_FAILED:
        _explain_still_running(request, outcome)
    return outcome


def read_prior(request: SweepRequest) -> list[dict[str, Any]]:
    """What earlier runs on the same hardware group measured of this matrix's configs, for
    `adaptive` (the sweep module's `prior`): [{config, score}], sorted by config id.

    The hardware group is the matrix's `hardware.gpu` (a result line's `gpu`); none for `auto`.
    Runs that started before this one count (a resume reads the same prior, so it makes the
    same decisions); simulated lines count only for an inventory whose hosts are all
    simulated, and real ones only for one that has a real host. A config's score is its
    objective value in the latest run that measured it (the mean of that run's launches of
    it), else the value of its screening workload there.
    """
    gpu = (request.matrix.get("hardware") or {}).get("gpu")
    if request.strategy != "adaptive" or not isinstance(gpu, str) or gpu == "auto":
        return []
    try:
        planned = plan(request.matrix, gpu=gpu).to_dict()
    except (MatrixError, CatalogError, ValueError):
        return []  # the node's own plan says what is wrong with the matrix
    ids = {launch["config"] for launch in planned["launches"]}
    objective = contract.objective_of({**request.matrix, **planned})
    simulated = all(
        bool(request.inventory.hostvars[host].get("bwtune_simulated")) for host in request.inventory.hosts
    )
    try:
        conn = results_db.connect(create=False)
    except results_db.MissingDatabaseError:
        return []
    try:
        this = conn.execute("SELECT created_at FROM runs WHERE run_id = ?", (request.run_id,)).fetchone()
        runs = conn.execute(
            "SELECT run_id FROM runs WHERE run_id != ? AND (? IS NULL OR created_at < ?) "
            "ORDER BY created_at, run_id",
            (request.run_id, this and this["created_at"], this and this["created_at"]),
        ).fetchall()
        latest: dict[str, float] = {}
        for row in runs:
            lines = [
                *results_db.run_results(conn, row["run_id"]),
                *results_db.superseded_results(conn, row["run_id"]),
            ]
            for config_id, value in _run_values(lines, ids, gpu, simulated, objective).items():
                latest[config_id] = value  # runs oldest first: the latest run's value stays
    finally:
        conn.close()
    return [{"config": config_id, "score": latest[config_id]} for config_id in sorted(latest)]


def _run_values(
    lines: list[dict[str, Any]], ids: set[str], gpu: str, simulated: bool, objective: Mapping[str, Any]
) -> dict[str, float]:
    """config id -> the mean of one run's values for it (objective, else screening workload)."""
    full: dict[str, list[float]] = {}
    screen: dict[str, list[float]] = {}
    for line in lines:
        if line.get("config_id") not in ids or line.get("gpu") != gpu:
            continue
        if bool(line.get("simulated")) != simulated:
            continue
        value = contract.eligible_value(line, objective)
        if value is not None:
            full.setdefault(line["config_id"], []).append(value)
        value = contract.eligible_value(line, objective, contract.SCREEN_WORKLOAD)
        if value is not None:
            screen.setdefault(line["config_id"], []).append(value)
    values = {c: sum(v) / len(v) for c, v in screen.items()}
    values.update({c: sum(v) / len(v) for c, v in full.items()})
    return {c: v for c, v in values.items() if v > 0}


def attach(request: SweepRequest) -> SweepOutcome:
    """Follow a run its nodes are still sweeping; keep its results when it ends.

    Ctrl-C stops following only: the nodes go on, as they did when bwtune was gone.
    """
    playbook_run = _follow(request, ATTACH_PLAYBOOK, request.run_extravars(), "following")
    if playbook_run.canceled:
        return SweepOutcome(
            request.run_id,
            exit_codes.CANCELED,
            messages=[
                f"stopped following run {request.run_id}; its nodes go on: "
                f"follow it again with `bwtune sweep --attach {request.run_id}`, "
                f"or stop it with `bwtune cancel {request.run_id}`"
            ],
        )
    return _collect(request, playbook_run)


def _follow(request: SweepRequest, playbook: str, extravars: dict[str, Any], verb: str) -> runner.PlaybookRun:
    """Run a playbook with the live view (progress on stderr) and Ctrl-C handling."""
    pdd = runner.private_data_dir(request.run_id)
    hosts = request.inventory.hosts
    state = SweepState.for_hosts({host: request.inventory.simulated(host) for host in hosts})
    if playbook == ATTACH_PLAYBOOK:
        state.ctrl_c = "Ctrl-C stops following (the nodes go on)"
    title = f"bwtune: {verb} run {request.run_id} on {len(hosts)} host(s)"
    # With -v ansible-playbook's own output goes to stderr too: lines, not a live table.
    live = False if request.verbosity else None
    with (
        runner.cancel_on_interrupt() as cancel,
        ProgressView(state, title, quiet=request.quiet, live=live) as view,
    ):
        playbook_run = runner.run_playbook(
            playbook,
            request.inventory,
            extravars,
            limit=request.limit,
            forks=request.forks,
            private_data_dir=pdd,
            on_event=view.on_event,
            quiet=True,
            cancel=cancel.event,
            envvars=dict(request.node_env),
            verbosity=request.verbosity,
            extra_args=request.extra_args(),
        )
        if playbook_run.canceled and playbook == SWEEP_PLAYBOOK:
            view.note(f"bwtune: cancelling run {request.run_id}: stopping the sweep on the nodes")
    return playbook_run


def _cancel(request: SweepRequest, pdd: Path) -> SweepOutcome:
    messages = stop_run(request, pdd)
    messages.append(f"resume with: {request.resume_command()}")
    return SweepOutcome(request.run_id, exit_codes.CANCELED, messages=messages)


def stop_run(request: SweepRequest, pdd: Path) -> list[str]:
    """Run the cancel playbook for the run: each node stops its sweep and its server."""
    stop = runner.run_playbook(
        CANCEL_PLAYBOOK,
        request.inventory,
        request.run_extravars(),
        limit=request.limit,
        private_data_dir=pdd,
        quiet=True,
        verbosity=request.verbosity,
        extra_args=request.extra_args(),
    )
    messages = [failure.line() for failure in stop.failures.values()]
    if stop.error:
        messages.append(f"cancel playbook: {stop.error}")
    stopped = sorted(set(stop.hosts) - set(stop.failures))
    messages.append(f"cancelled run {request.run_id}; stopped on: {', '.join(stopped) or 'no host'}")
    return messages


def _explain_still_running(request: SweepRequest, outcome: SweepOutcome) -> None:
    """A resume a node refused because the run's sweep still runs there: say so, and how to
    follow or stop it, instead of the node's refusal."""
    running = still_running(request)
    for host, progress in sorted(running.items()):
        outcome.messages = [
            m for m in outcome.messages if not m.startswith((f"host {host} ", f"host {host}:"))
        ]
        done = f" ({progress.get('done')}/{progress.get('planned')} done)" if progress.get("planned") else ""
        outcome.messages.append(
            f"run {request.run_id} is still running on {host}{done}: follow it with "
            f"`bwtune sweep --attach {request.run_id}`, or stop it with `bwtune cancel {request.run_id}`"
        )


def still_running(request: SweepRequest) -> dict[str, dict[str, Any]]:
    """host -> progress, for each host where the run's sweep process is alive now."""
    extravars = {**request.run_extravars(), "sweep_attach_follow": False}
    look = runner.run_playbook(
        ATTACH_PLAYBOOK,
        request.inventory,
        extravars,
        limit=request.limit,
        private_data_dir=runner.private_data_dir(request.run_id),
        quiet=True,
        extra_args=request.extra_args(),
    )
    return {
        host: dict(res.get("progress") or {})
        for host, res in look.results("sweep_progress", task=FOLLOW_TASK).items()
        if res.get("finished") is False and (res.get("progress") or {}).get("run_id")
    }


def _collect(request: SweepRequest, playbook_run: runner.PlaybookRun) -> SweepOutcome:
    messages = [failure.line() for failure in playbook_run.failures.values()]
    if playbook_run.error:
        messages.append(f"the sweep playbook did not run: {playbook_run.error}")
    by_host = node_results(playbook_run)
    lines: list[dict[str, Any]] = []
    for host, result in sorted(by_host.items()):
        error = result.get("error")
        if error:  # the node's own words, once: not also as the task that failed the host
            messages = [m for m in messages if not m.startswith(f"host {host} failed")]
            messages.append(f"host {host}: {one_line(error)}")
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
    try:
        output, reports, replaced = _store(request, by_host, lines)
    except (sqlite3.Error, OSError, results_db.StorageError) as err:
        paths = {host: path for host, path in request.node_results_paths().items() if host in by_host}
        messages.append(results_db.storage_failure_message(err, request.run_id, paths))
        return SweepOutcome(request.run_id, exit_codes.HOST_FAILED, messages=messages)
    messages += [f"replaced: {replacement.line()}" for replacement in replaced]
    code = _exit_code(playbook_run, by_host, lines)
    if code != exit_codes.HOST_FAILED and (why := results_db.nothing_measured(output)):
        # A node's own "nothing measured" failure says the same as this line: keep one.
        messages = [m for m in messages if not m.startswith("host ")] + [why]
        code = exit_codes.NOTHING_MEASURED
    return SweepOutcome(request.run_id, code, output=output, messages=messages, reports=reports)


def _store(
    request: SweepRequest, by_host: Mapping[str, Mapping[str, Any]], lines: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[Path], tuple[Any, ...]]:
    conn = results_db.connect()
    try:
        results_db.record_run(
            conn, request.run_id, matrix=request.matrix, plan_summary=_plan_summary(by_host) or None
        )
        imported = results_db.import_results(conn, lines, run_id=request.run_id)
        output = results_db.build_run_output(conn, request.run_id)
        reports = write_reports(conn, request.run_id)
    finally:
        conn.close()
    return output, reports, imported.replaced


def _exit_code(
    playbook_run: runner.PlaybookRun, by_host: Mapping[str, Mapping[str, Any]], lines: list[dict[str, Any]]
) -> int:
    """HOST_FAILED when a host failed for any reason but having measured nothing."""
    measured = {line["host"] for line in lines if line.get("status") == contract.OK}
    for host in playbook_run.failures:
        result = by_host.get(host)
        nothing_measured_only = result is not None and not result.get("error") and host not in measured
        if not nothing_measured_only:
            return exit_codes.HOST_FAILED
    if playbook_run.error or any(result.get("error") for result in by_host.values()):
        return exit_codes.HOST_FAILED
    if playbook_run.rc != 0 and not playbook_run.failures:
        return exit_codes.HOST_FAILED
    return exit_codes.OK


def one_line(message: Any) -> str:
    """A node's error as one line: a traceback's last line, any text's lines joined."""
    lines = [line.strip() for line in str(message).strip().splitlines() if line.strip()]
    if not lines:
        return "no message"
    if lines[0].startswith("Traceback"):
        return lines[-1]
    text = " ".join(lines)
    return text if len(text) <= 400 else text[:397] + "..."


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
    summary = output.get("summary") or {}
    objective = summary.get("objective") or {}
    metric = objective.get("metric", "objective")
    goal = objective.get("goal", "max")
    simulated = summary.get("simulated")
    results = list(output.get("results") or [])
    axes = sorted({axis for result in results for axis in (result.get("point") or {})})
    hosts = {result.get("host") for result in results}
    title = f"run {output.get('run_id')}" + ("  SIMULATED: bwtune stand-in, not a GPU" if simulated else "")
    host_column = ["host"] if len(hosts) > 1 else []
    table = console.table(
        ["config", *host_column, *axes, "status", f"{metric} ({goal})", "95% CI"], title=title
    )
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
    console.print_renderable(table, out)
    if best:
        note = " (simulated)" if simulated else ""
        value = best.get("objective")
        shown = "" if value is None else f": {value:.1f} {metric}"
        print(f"best: {best.get('id')} on {best.get('host')}{shown}{note}", file=out)


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
