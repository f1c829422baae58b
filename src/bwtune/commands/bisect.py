"""`bwtune bisect GOOD_RUN BAD_RUN`: the plan of a bisection between two stored runs (issue 28).

What differs between the two runs' stacks on one config, each component's candidates, the
most steps, launches and builds a bisection would take, and the stored launches' verdict.
The reading and the plan are `bwtune.bisect.from_runs`'. Exit codes: 0 a plan, 1 not
reproduced (the bad run not measurably worse; the plan is still printed), 2 bad input.

`bwtune bisect GOOD BAD --measure --local --checkout DIR --server-args ARGS` measures
instead: GOOD and BAD are revisions of an SGLang checkout, each step's stack is made and
launched on this machine with the stand-in (`bwtune.bisect.local`, docs/bisect.md). Exit
0 when a first bad commit is found, 1 when not (not reproduced, undecided, among skipped
commits), 2 bad input. Measuring on an inventory's hosts is not built.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from bwtune import exit_codes, store
from bwtune.bisect import findings, from_runs
from bwtune.bisect.bisection import Settings
from bwtune.bisect.component_ranges import BisectError

NAME = "bisect"
HELP = (
    "Plan a bisection between a good and a bad run's stacks; with --measure --local, bisect "
    "SGLang commits on this machine with the stand-in."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("good_run", metavar="GOOD_RUN", help="the run measured on the good stack")
    parser.add_argument("bad_run", metavar="BAD_RUN", help="the run measured on the bad stack")
    parser.add_argument(
        "--config",
        metavar="ID",
        help="the config to compare (default: the bad run's best; the same id in the good run)",
    )
    parser.add_argument("--host", help="only this host's lines of the config, in both runs")
    parser.add_argument(
        "--candidates",
        metavar="FILE",
        help="YAML or JSON: component -> versions oldest first, each a string or {version, note} "
        "(default: each component's two ends)",
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    store.add_db_argument(parser)
    measure = parser.add_argument_group("measuring (GOOD and BAD are then revisions of --checkout)")
    measure.add_argument("--measure", action="store_true", help="measure the steps instead of planning")
    measure.add_argument(
        "--local", action="store_true", help="on this machine with the SGLang stand-in (the only place built)"
    )
    measure.add_argument(
        "--checkout", metavar="DIR", help="the SGLang git checkout whose commits are bisected"
    )
    measure.add_argument(
        "--server-args",
        metavar="ARGS",
        help="the pinned config: launch_server's arguments as one string (--model-path and flags, "
        "no --host or --port)",
    )
    measure.add_argument(
        "--run-dir",
        metavar="DIR",
        help="the bisection's folder and log (default $BWTUNE_HOME/bisect/GOOD-BAD)",
    )
    measure.add_argument(
        "--stack-cache",
        metavar="DIR",
        help="built stacks, one per commit (default $BWTUNE_HOME/bisect/stacks)",
    )
    measure.add_argument(
        "--max-launches",
        type=int,
        metavar="N",
        default=Settings.max_launches,
        help="launches per step at most",
    )


def run(args: argparse.Namespace) -> int:
    if args.measure or args.local:
        return _measure(args)
    path = args.db or store.default_db_path()
    try:
        candidates = from_runs.load_candidates(args.candidates) if args.candidates else None
        conn = store.connect_readonly(path)
    except BisectError as err:
        print(f"bwtune bisect: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except (store.SchemaTooNewError, *store.DB_INPUT_ERRORS) as err:
        print(f"bwtune bisect: results database {path}: {err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    try:
        store.print_notice(conn, "bwtune bisect")
        planned = from_runs.plan_from_runs(
            conn, args.good_run, args.bad_run, config_id=args.config, host=args.host,
            candidates=candidates, candidates_source=args.candidates,
        )  # fmt: skip
    except (BisectError, store.UnknownRunError) as err:
        print(f"bwtune bisect: {err.args[0] if err.args else err}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    finally:
        conn.close()
    if args.json:
        print(json.dumps(planned.to_dict(), indent=2))
    else:
        for line in planned.lines():
            print(line)
        if not planned.reproduced:
            print(planned.not_reproduced_text())
        print(from_runs.NOT_BUILT_YET)
    if not planned.reproduced:
        if args.json:
            print(f"bwtune bisect: {planned.not_reproduced_text()}", file=sys.stderr)
        return exit_codes.NOT_VERIFIED  # 1: did not reproduce
    return exit_codes.OK


def _measure(args: argparse.Namespace) -> int:
    from bwtune.bisect import local

    def bad(text: str) -> int:
        print(f"bwtune bisect: {text}", file=sys.stderr)
        return exit_codes.BAD_INPUT

    if not args.local:
        return bad("--measure: only --local (this machine, the stand-in) is built; measuring on hosts is not")
    if not args.measure:
        return bad("--local: add --measure (without it bwtune bisect plans from two stored runs)")
    for flag, value in (("--checkout", args.checkout), ("--server-args", args.server_args)):
        if not value:
            return bad(f"--measure --local: give {flag}")
    for flag, value in (("--config", args.config), ("--host", args.host), ("--candidates", args.candidates)):
        if value:
            return bad(f"{flag} {value}: not with --measure (the candidates are the checkout's commits)")
    try:
        server_args = shlex.split(args.server_args)
    except ValueError as exc:
        return bad(f"--server-args {args.server_args!r}: {exc}")
    try:
        settings = Settings(max_launches=args.max_launches)
        settings.check()
        outcome = local.run_local(
            local.LocalRequest(
                checkout=Path(args.checkout),
                good=args.good_run,
                bad=args.bad_run,
                server_args=server_args,
                run_dir=Path(args.run_dir) if args.run_dir else None,
                stack_cache=Path(args.stack_cache) if args.stack_cache else None,
                settings=settings,
            )
        )
    except BisectError as err:
        return bad(str(err))
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=2))
    else:
        for line in outcome.lines():
            print(line)
    found = outcome.report.outcome == findings.FOUND and outcome.first_bad()
    return exit_codes.OK if found else exit_codes.NOT_VERIFIED
