"""`bwtune regress`: measure the matrix's configs again and compare them with their history.

Each repetition is a launch of every config: the first through `bwtune sweep`'s own path
(`sweep_service.run_sweep`), the others as forced resumes of the same run (the database keeps each
earlier launch as a superseded line). The run is tagged `regression`; the verdicts, change
points and attribution come from `bwtune.regression_history`, the files from
`bwtune.regression_outputs`. Exit codes: 0 no regression, 1 regression, 2 bad input or a
failed run, 3 nothing measured (every launch failed: no verdict). docs/regression.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from bwtune import ansible_run, exit_codes, regression, regression_history, regression_outputs, report, store
from bwtune.app import sweep_service
from bwtune.bisect import from_runs
from bwtune.commands import _playbook_options as playbook_options

NAME = "regress"
HELP = "Measure the matrix's configs with repetitions and compare them with their history (regressions)."

# A repetition is a launch: the launch-to-launch spread is most of the noise (docs/regression.md).
DEFAULT_REPETITIONS = 8
MAX_REPETITIONS = 50
# A regression matrix pins a few configs (production and some alternates), not a search.
MAX_CONFIGS = 32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    playbook_options.add_arguments(parser, inventory_required=True)
    parser.add_argument("-m", "--matrix", required=True, help="the pinned configs (a sweep matrix, YAML)")
    parser.add_argument("--baseline", metavar="NAME", help="compare with this named baseline's run")
    parser.add_argument(
        "--min-effect",
        type=float,
        default=regression.Settings.min_effect,
        help="smallest relative change that counts (default 0.03: 3%%)",
    )
    parser.add_argument(
        "--repetitions",
        type=int,
        default=DEFAULT_REPETITIONS,
        help=f"launches of each config (default {DEFAULT_REPETITIONS}; docs/regression.md has a table)",
    )
    parser.add_argument(
        "--node-results-dir", help="where nodes keep results files (default: the sweep role's)"
    )
    parser.add_argument(
        "--output-dir", type=Path, help="also write the outputs here (default: the run's folder)"
    )
    parser.add_argument(
        "--textfile", type=Path, help="write the Prometheus textfile here too (node_exporter)"
    )
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    try:
        settings = regression.Settings(min_effect=args.min_effect)
        settings.check()
        if not 1 <= args.repetitions <= MAX_REPETITIONS:
            raise sweep_service.BadInput(f"--repetitions {args.repetitions}: between 1 and {MAX_REPETITIONS}")
        store.check_writable()
        if args.baseline:
            _check_baseline(args.baseline)
        request = _request(args)
    except (
        ValueError,
        sweep_service.BadInput,
        ansible_run.InventoryError,
        playbook_options.ExtraVarsError,
        store.StorageError,
        LookupError,
    ) as exc:
        print(f"bwtune regress: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    failed = measure(request, args.repetitions, quiet=args.quiet, estimate=_estimate(request.matrix))
    if failed is not None:
        return failed
    conn = store.connect()
    try:
        store.tag_run(conn, request.run_id, regression_history.TAG)
        analysis = regression_history.analyze(conn, request.run_id, settings, baseline=args.baseline)
        folder = store.run_dir(request.run_id)
        written = regression_outputs.write_all(analysis, folder, args.textfile)
        if args.output_dir:
            written.update(
                {f"copy {k}": v for k, v in regression_outputs.write_all(analysis, args.output_dir).items()}
            )
        report.write_report(
            conn, request.run_id, html_path=folder / "report.html", md_path=folder / "report.md",
            regression=analysis.to_dict(),
        )  # fmt: skip
    finally:
        conn.close()
    if args.json:
        print(json.dumps({**analysis.to_dict(), "files": {k: str(v) for k, v in written.items()}}, indent=2))
    else:
        print(regression_outputs.markdown(analysis), end="")
        for command in from_runs.bisect_commands(analysis):  # a regression with a stack change
            print(f"to find the component version that cost it (the plan; docs/bisect.md): {command}")
        print(f"report: {folder / 'report.html'}")
        for what, path in written.items():
            print(f"{what}: {path}")
    if analysis.regressed:
        return exit_codes.REGRESSION
    if not analysis.measured:
        # Nothing to compare is never "no regression": the exit code a sweep gives it.
        print(
            f"bwtune regress: run {request.run_id} measured nothing: every launch of every config "
            "failed; no verdict (the failures are in its report)",
            file=sys.stderr,
        )
        return exit_codes.NOTHING_MEASURED
    return exit_codes.OK


def _request(args: argparse.Namespace) -> sweep_service.SweepRequest:
    extra_vars = playbook_options.check_extra_vars(args.extra_vars)
    matrix = sweep_service.load_matrix(args.matrix)  # before the inventory: the cheaper check first
    _check_size(matrix, str(args.matrix))
    inventory = ansible_run.load_inventory(args.inventory, args.limit)
    request = sweep_service.SweepRequest(
        inventory=inventory,
        matrix=matrix,
        matrix_source=str(args.matrix),
        run_id=ansible_run.new_run_id(),
        limit=args.limit,
        strategy="grid",  # every pinned config, every time
        forks=args.forks,
        node_results_dir=args.node_results_dir,
        quiet=args.quiet,
        extra_vars=extra_vars,
        verbosity=playbook_options.verbosity(args),
    )
    return request


def _check_size(matrix: dict[str, Any], source: str) -> None:
    from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import plan

    try:
        configs = plan(matrix).to_dict()["configs"]
    except Exception:  # `gpu: auto` matrices are planned on the node; the node refuses
        return
    valid = sum(1 for c in configs if c["status"] == "valid")
    if valid > MAX_CONFIGS:
        raise sweep_service.BadInput(
            f"{source}: {valid} configs; a regression matrix pins at most {MAX_CONFIGS} "
            "(the production config and a few alternates)"
        )


def _check_baseline(name: str) -> None:
    conn = store.connect()
    try:
        if store.get_baseline(conn, name) is None:
            raise LookupError(f"--baseline {name}: no such baseline (bwtune baseline list shows them)")
    finally:
        conn.close()


def _estimate(matrix: dict[str, Any]) -> tuple[float, str] | None:
    """(seconds, where from) of one repetition before any ran: the plan's launches at the
    cost `bwtune plan` gives them (measured launches of the GPU, else the matrix's estimates);
    None when the controller cannot plan the matrix (`gpu: auto`)."""
    from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import plan
    from bwtune.app import plan_service

    try:
        result = plan(matrix)
        cost = plan_service.estimate_cost(result, None)
    except Exception:  # an estimate only: the node plans and refuses for itself
        return None
    launches = len(result.launches)
    if not launches:
        return None
    return (
        cost.per_launch_s * launches,
        f"{launches} launches at {_duration(cost.per_launch_s)} ({cost.source})",
    )


def measure(
    request: sweep_service.SweepRequest,
    repetitions: int,
    *,
    quiet: bool = False,
    estimate: tuple[float, str] | None = None,
) -> int | None:
    """Launch every config `repetitions` times; None when all went, else the exit code.

    Before each repetition a line on stderr says which one it is and when the run should
    end: from the time the repetitions so far took, before the first from `estimate`."""
    took: list[float] = []
    failed: dict[str, int] = {}  # failed launches so far, by class
    for number in range(1, repetitions + 1):
        if not quiet:
            line = progress_line(number, repetitions, took, estimate, failed)
            print(f"bwtune regress: {line}", file=sys.stderr, flush=True)
        step = request if number == 1 else dataclasses.replace(request, resumed=True, force=True)
        started = _clock()
        outcome = sweep_service.run_sweep(step)
        took.append(_clock() - started)
        # Each repetition launches every config again: its lines' failures are its own.
        for name, count in ((outcome.output or {}).get("summary") or {}).get("failed", {}).items():
            failed[name] = failed.get(name, 0) + int(count)
        for message in outcome.messages:
            if not message.startswith("replaced: "):  # every forced repetition replaces: no news
                print(f"bwtune regress: {message}", file=sys.stderr)
        if outcome.exit_code == exit_codes.CANCELED:
            return exit_codes.CANCELED
        # Every launch failing is a result (ok -> failed is a regression), not a failed run.
        if outcome.exit_code not in (exit_codes.OK, exit_codes.NOTHING_MEASURED):
            print(
                f"bwtune regress: repetition {number}/{repetitions} of run {request.run_id} failed "
                f"(sweep exit {outcome.exit_code}); no verdicts",
                file=sys.stderr,
            )
            _tag_anyway(request.run_id)
            return exit_codes.BAD_INPUT
    return None


_clock = time.monotonic


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")


def progress_line(
    number: int,
    repetitions: int,
    took: list[float],
    estimate: tuple[float, str] | None = None,
    failed: dict[str, int] | None = None,
) -> str:
    """ "repetition 3/8; ETA 12m30s (6 left at 2m30s each, the mean of the 2 so far)", and
    the launches that failed so far ("; failed launches so far: crashed 1 (...)")."""
    head = f"repetition {number}/{repetitions}"
    if failed:
        counts = ", ".join(f"{name} {n}" for name, n in sorted(failed.items()))
        head = f"{head}; failed launches so far: {counts} (kept and told, never compared as values)"
    if not took:
        if estimate is None:
            return f"{head}; the ETA follows from this repetition's time"
        each, source = estimate
        return f"{head}; ETA about {_duration(each * repetitions)} (estimated: a repetition is {source})"
    each = sum(took) / len(took)
    left = repetitions - number + 1
    return (
        f"{head}; ETA {_duration(each * left)} ({left} left at {_duration(each)} each, "
        f"the mean of the {len(took)} so far)"
    )


def _tag_anyway(run_id: str) -> None:
    """A failed regression run is still one: keep it tagged so its results are found."""
    try:
        conn = store.connect()
        try:
            store.tag_run(conn, run_id, regression_history.TAG)
        finally:
            conn.close()
    except (store.UnknownRunError, sqlite3.Error, OSError):
        pass
