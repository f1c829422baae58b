"""`bwtune speculative BASE_RUN`: tune speculative decoding on a finished run's winner (issue 26).

The winner's flags held, MTP off and a small grid of num-steps / eagle-topk / draft tokens,
swept at the base run's target load (its objective) or at the closed-loop concurrencies
of `--load`: a run of its own, linked to the base run. Parse, call, render: the stage is
`bwtune.app.speculative_stage`'s; the sweep `bwtune.app.sweep_service`'s.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bwtune import ansible_run, exit_codes, store
from bwtune.analysis import speculative as spec_view
from bwtune.app import speculative_stage as stage
from bwtune.app.sweep_service import STRATEGIES, BadInput
from bwtune.commands import _playbook_options as playbook_options
from bwtune.commands._sweep_output import print_outcome

NAME = "speculative"
HELP = "Tune speculative decoding (MTP off, num-steps, eagle-topk, draft tokens) on a run's winner."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base_run", metavar="BASE_RUN", help="the finished run whose winner to build on")
    playbook_options.add_arguments(parser)
    parser.add_argument(
        "--load",
        action="append",
        type=int,
        metavar="N",
        help="a closed-loop concurrency to measure at (repeatable); default: the base run's own workloads "
        "and objective",
    )
    parser.add_argument(
        "--target", type=int, metavar="N", help="the --load the winner is chosen at (default: the first)"
    )
    parser.add_argument(
        "--steps",
        default=",".join(map(str, stage.DEFAULT_STEPS)),
        help="speculative-num-steps values, comma-separated (default %(default)s)",
    )
    parser.add_argument(
        "--topk",
        default=",".join(map(str, stage.DEFAULT_TOPK)),
        help="speculative-eagle-topk values, comma-separated (default %(default)s)",
    )
    parser.add_argument(
        "--draft-tokens",
        default="",
        help="speculative-num-draft-tokens values, comma-separated (default: steps + 1 with topk 1, "
        "else steps x topk)",
    )
    for option, what in (("--input-len", "tokens in"), ("--output-len", "tokens out")):
        parser.add_argument(option, type=int, help=f"with --load: {what} (default: the base objective's)")
    parser.add_argument(
        "--num-prompts", type=int, help="with --load: requests per load (default 2 x the concurrency, >= 8)"
    )
    parser.add_argument("--strategy", choices=STRATEGIES, default="grid", help="default grid: every setting")
    parser.add_argument(
        "--node-results-dir", help="where nodes keep results files (default: the sweep role's)"
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def _ints(option: str, text: str) -> list[int]:
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            out.append(int(part))
        except ValueError:
            raise BadInput(f"{option} {text!r}: {part!r} is not a whole number") from None
    return out


def request_from_args(args: argparse.Namespace) -> stage.StageRequest:
    extra_vars = playbook_options.check_extra_vars(args.extra_vars)
    return stage.StageRequest(
        base_run=args.base_run,
        inventory=ansible_run.load_inventory(args.inventory, args.limit),
        loads=list(args.load or []),
        target=args.target,
        steps=_ints("--steps", args.steps),
        topk=_ints("--topk", args.topk),
        draft_tokens=_ints("--draft-tokens", args.draft_tokens),
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.num_prompts,
        strategy=args.strategy,
        limit=args.limit,
        forks=args.forks,
        node_results_dir=args.node_results_dir,
        quiet=args.quiet,
        extra_vars=extra_vars,
        verbosity=playbook_options.verbosity(args),
    )


def run(args: argparse.Namespace) -> int:
    try:
        request = request_from_args(args)
        store.check_writable()
        plan, sweep = stage.prepare(request)
    except (BadInput, ansible_run.InventoryError, playbook_options.ExtraVarsError, store.StorageError) as exc:
        print(f"bwtune: speculative: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    outcome = stage.run_stage(request, prepared=(plan, sweep))
    sweep_outcome = outcome.sweep
    if args.json and sweep_outcome.output is not None:
        sweep_outcome.output = {**sweep_outcome.output, "speculative": summary(outcome)}
    print_outcome(sweep_outcome, as_json=args.json)
    if not args.json:
        for line in lines(outcome):
            print(line)
    return sweep_outcome.exit_code


def summary(outcome: stage.StageOutcome) -> dict[str, Any]:
    return {**outcome.link, "rows": outcome.rows, "conclusion": outcome.conclusion}


def lines(outcome: stage.StageOutcome) -> list[str]:
    """After the results table: per load MTP off against its best setting, then the verdict."""
    link = outcome.link
    sim = "  SIMULATED: bwtune stand-in, not a GPU" if any(r["simulated"] for r in outcome.rows) else ""
    base = link["base_config"]
    head = f"speculative decoding on run {link['base_run']}'s winner {base['id']} ({base['setting']})"
    out = ["", head + sim]
    out += [f"  not planned: {d}" for d in link.get("dropped") or []]
    for row in outcome.rows:
        off, on = row["off"], row["on"]
        target = " (target)" if row["target"] else ""
        has_accept = on is not None and on["accept_length"] is not None
        accept = f", accept length {on['accept_length']:.2f}" if has_accept else ""
        shown_off = f"off {off['value']:.4g}" if off else "off not measured"
        shown_on = f"{on['setting']} {on['value']:.4g}{accept}" if on else "no setting on measured"
        out.append(
            f"  {row['workload']}{target} ({row['load']}, {row['metric']}): {shown_off}; best {shown_on}: "
            f"{spec_view.verdict_text(row)}"
        )
    verdict = outcome.conclusion
    if verdict is not None:
        out.append(f"winner at the target load ({verdict['load']}): {verdict['winner']}")
    return out
