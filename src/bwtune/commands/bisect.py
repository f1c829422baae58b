"""`bwtune bisect GOOD_RUN BAD_RUN`: the plan of a bisection between two stored runs (issue 28).

What differs between the two runs' stacks on one config, each component's candidates, the
most steps, launches and builds a bisection would take, and the stored launches' verdict.
The plan only: measuring the steps (building each stack, launching it) is not built yet
(docs/bisect.md). The reading and the plan are `bwtune.bisect.from_runs`'. Exit codes: 0
a plan, 1 not reproduced (the bad run not measurably worse; the plan is still printed),
2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from bwtune import exit_codes, store
from bwtune.bisect import from_runs
from bwtune.bisect.component_ranges import BisectError

NAME = "bisect"
HELP = "Plan a bisection between a good and a bad run's stacks (the plan only: no builds or launches yet)."


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


def run(args: argparse.Namespace) -> int:
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
