"""Speculative decoding as a stage (issue 26): `bwtune speculative BASE_RUN`.

After a sweep has found the best base config (backends, parallelism), this tunes
speculative decoding on it at the load that matters: the winner's flags held, speculative
decoding `off` and a small grid of `speculative-num-steps` x `speculative-eagle-topk` x
`speculative-num-draft-tokens` (each planned: a setting the planner prunes is dropped with its
reason), swept with the base run's objective at its target load, or at the closed-loop
concurrencies of `--load` (the objective then total output tok/s at the target one). The
stage is a run of its own, linked to the base run (tagged `speculative-stage` and
`speculative-stage-of:BASE_RUN`, and `speculative_stage.json` in its folder); its report's
section *Speculative decoding* says per load whether MTP wins and with which setting, and
the accept length each reached. The winner may be "off".

Nothing here parses a command line or prints: `bwtune.commands.speculative` builds the
`StageRequest` and renders the `StageOutcome`; the sweep is `sweep_service.run_sweep`'s.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import plan
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import CatalogError
from bwtune import ansible_run, store
from bwtune.analysis import speculative as spec_view
from bwtune.app import sweep_service
from bwtune.app.sweep_service import BadInput, SweepOutcome, SweepRequest

TAG = "speculative-stage"
LINK_FILE = spec_view.LINK_FILE
AXIS = "speculative"
DEFAULT_STEPS = (1, 2, 3)
DEFAULT_TOPK = (1,)
DEFAULT_ALGORITHM = "NEXTN"  # MTP: the checkpoint's own draft layer (Qwen3.5 ships one)
MAX_SETTINGS = 12  # a small grid: the stage is one launch per setting at every load
# Flags a speculative setting moves together with (SGLang needs them beside the draft on
# hybrid models); taken from the base run's own speculative bundle when it has one.
COMPANIONS = ("mamba-radix-cache-strategy",)


@dataclass
class StageRequest:
    base_run: str
    inventory: ansible_run.Inventory
    loads: list[int] = field(default_factory=list)  # closed-loop concurrencies; empty: the base's workloads
    target: int | None = None  # the load the winner is chosen at (default: the first of loads)
    steps: list[int] = field(default_factory=lambda: list(DEFAULT_STEPS))
    topk: list[int] = field(default_factory=lambda: list(DEFAULT_TOPK))
    draft_tokens: list[int] = field(default_factory=list)  # empty: steps + 1 (topk 1), steps x topk
    input_len: int | None = None
    output_len: int | None = None
    num_prompts: int | None = None  # per load; default 2 x the concurrency (at least 8)
    strategy: str = "grid"
    limit: str | None = None
    forks: int | None = None
    node_results_dir: str | None = None
    quiet: bool = False
    node_env: dict[str, str] = field(default_factory=dict)
    extra_vars: list[str] = field(default_factory=list)
    verbosity: int = 0
    run_id: str = field(default_factory=ansible_run.new_run_id)


@dataclass
class StagePlan:
    matrix: dict[str, Any]
    base_config: dict[str, Any]  # the base run's winner: id, host, flags, setting
    settings: dict[str, dict[str, Any]]  # bundle name -> its flags ({} for off)
    dropped: list[str]  # settings the planner refused, each with its reason


@dataclass
class StageOutcome:
    sweep: SweepOutcome
    stage: StagePlan
    rows: list[dict[str, Any]]  # analysis.speculative.speculative_rows of the stage run
    conclusion: dict[str, Any] | None
    link: dict[str, Any]


def base_winner(run_id: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The base run's matrix, best result (its `--json` view) and the matrix's source."""
    try:
        conn = store.connect_readonly()
    except store.DB_INPUT_ERRORS as err:
        raise BadInput(f"base run {run_id}: {err}") from None
    try:
        try:
            output = store.build_run_output(conn, run_id)
        except store.UnknownRunError:
            raise BadInput(f"base run {run_id}: no such run in the results database") from None
        stored_matrix = store.get_run(conn, run_id).matrix
    finally:
        conn.close()
    best = output.get("best")
    if not best:
        raise BadInput(f"base run {run_id}: no ok config to build on (nothing measured)")
    saved = store.run_dir(run_id) / "matrix.json"
    if saved.is_file():
        matrix, source = sweep_service.saved_matrix(run_id, "BASE_RUN")
    elif stored_matrix:
        matrix, source = copy.deepcopy(stored_matrix), f"run {run_id} (results database)"
    else:
        raise BadInput(f"base run {run_id}: no matrix kept for it ({saved} is missing)")
    return matrix, best, source


def _template(matrix: dict[str, Any], winner: dict[str, Any]) -> dict[str, Any]:
    """The speculative flags a setting starts from, as the user spelt them: the winner's own
    bundle when it had speculative decoding on, else the base matrix's first bundle that
    turns it on, else the winner's flags (as SGLang resolved them), else NEXTN (MTP)."""
    bundles = matrix.get("bundles") or {}
    point = winner.get("point") or {}
    on = [
        b
        for named in bundles.values()
        for b in (named or {}).values()
        if isinstance(b, dict) and b.get("speculative-algorithm")
    ]
    own: list[dict[str, Any]] = []
    for axis, named in bundles.items():
        bundle = (named or {}).get(point.get(axis))
        if isinstance(bundle, dict) and bundle.get("speculative-algorithm"):
            own.append(bundle)
    flags = winner.get("flags") or {}
    source: dict[str, Any]
    if own:
        source = own[0]
    elif on:
        source = on[0]
    elif flags.get("speculative-algorithm"):
        source = flags
    else:
        source = {"speculative-algorithm": DEFAULT_ALGORITHM}
    keep = {k: v for k, v in source.items() if k.startswith("speculative-") or k in COMPANIONS}
    for name in spec_view.SPEC_FLAGS[1:]:
        keep.pop(name, None)
    return keep


def _grid(request: StageRequest) -> list[tuple[int, int, int]]:
    for what, values in (
        ("--steps", request.steps),
        ("--topk", request.topk),
        ("--draft-tokens", request.draft_tokens),
    ):
        bad = [v for v in values if not isinstance(v, int) or isinstance(v, bool) or v < 1]
        if bad:
            raise BadInput(f"{what} {bad[0]!r}: give whole numbers >= 1")
    if not request.steps or not request.topk:
        raise BadInput("--steps and --topk need at least one value each")
    out = []
    for steps in request.steps:
        for topk in request.topk:
            drafts = request.draft_tokens or [steps + 1 if topk == 1 else steps * topk]
            out += [(steps, topk, d) for d in drafts if (topk != 1 or d == steps + 1)]
    grid = list(dict.fromkeys(out))
    if not grid:
        raise BadInput(
            "--draft-tokens: with --topk 1 SGLang uses steps + 1 draft tokens; no setting of the grid is left"
        )
    if len(grid) > MAX_SETTINGS:
        raise BadInput(
            f"the speculative grid has {len(grid)} settings; at most {MAX_SETTINGS} "
            "(narrow --steps, --topk, --draft-tokens)"
        )
    return grid


def _workloads(request: StageRequest, base: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The stage's workloads and objective: the base's own, or one closed loop per --load."""
    objective = copy.deepcopy(base.get("objective") or {})
    workloads = [w for w in base.get("workloads") or [] if isinstance(w, dict)]
    if not request.loads:
        only = (
            ("--target", request.target),
            ("--input-len", request.input_len),
            ("--output-len", request.output_len),
            ("--num-prompts", request.num_prompts),
        )
        for what, value in only:
            if value is not None:
                raise BadInput(
                    f"{what} {value}: only with --load (the base run's workloads are kept as they are)"
                )
        return copy.deepcopy(workloads), objective
    bad = [n for n in request.loads if not isinstance(n, int) or isinstance(n, bool) or n < 1]
    if bad:
        raise BadInput(f"--load {bad[0]!r}: a load is a concurrency, a whole number >= 1")
    loads = list(dict.fromkeys(request.loads))
    target = request.target if request.target is not None else loads[0]
    if target not in loads:
        raise BadInput(f"--target {target}: not one of the loads given ({', '.join(map(str, loads))})")
    shape = next(
        (w for w in workloads if w.get("name") == objective.get("workload")),
        workloads[0] if workloads else {},
    )
    input_len = request.input_len or int(shape.get("input_len") or 256)
    output_len = request.output_len or int(shape.get("output_len") or 128)
    for what, value in (
        ("--input-len", input_len),
        ("--output-len", output_len),
        ("--num-prompts", request.num_prompts),
    ):
        if value is not None and value < 1:
            raise BadInput(f"{what} {value}: give a whole number >= 1")
    out = []
    for n in loads:
        prompts = request.num_prompts or max(8, 2 * n)
        out.append({"name": f"c{n}", "input_len": input_len, "output_len": output_len, "concurrency": n,
                    "num_prompts": prompts})  # fmt: skip
    return out, {"workload": f"c{target}", "metric": "output_throughput", "goal": "max"}


def stage_plan(request: StageRequest, base: dict[str, Any], winner: dict[str, Any], source: str) -> StagePlan:
    """The speculative matrix on the winner: its flags fixed (speculative ones taken out),
    one bundle axis `speculative`: `off` and each setting of the grid the planner accepts."""
    flags = dict(winner.get("flags") or {})
    fixed = {k: v for k, v in flags.items() if not k.startswith("speculative-") and k != "model-path"}
    template = _template(base, winner)
    settings: dict[str, dict[str, Any]] = {"off": {}}
    for steps, topk, drafts in _grid(request):
        bundle = {k: v for k, v in template.items() if k not in fixed}
        bundle.update({"speculative-num-steps": steps, "speculative-eagle-topk": topk,
                       "speculative-num-draft-tokens": drafts})  # fmt: skip
        settings[f"s{steps}k{topk}d{drafts}"] = bundle
    workloads, objective = _workloads(request, base)
    matrix: dict[str, Any] = {
        key: copy.deepcopy(base[key]) for key in ("model", "hardware", "sglang", "estimates") if key in base
    }
    matrix.update({"base": fixed, "axes": {AXIS: list(settings)}, "bundles": {AXIS: settings},
                   "workloads": workloads, "objective": objective})  # fmt: skip
    try:
        planned = plan(matrix)
    except (MatrixError, CatalogError) as err:
        raise BadInput(
            f"the speculative stage's matrix on {winner.get('id')} (from {source}) does not plan: {err}"
        ) from None
    dropped = []
    for config in planned.configs:
        name = config.point.get(AXIS)
        if config.status == "valid" or name is None:
            continue
        why = "; ".join(r.message for r in config.reasons) or config.status
        if name == "off":
            raise BadInput(
                f"base run's winner {winner.get('id')} with speculative decoding off does not plan: {why}"
            )
        dropped.append(f"{name}: {config.status} ({why})")
        settings.pop(name, None)
    if len(settings) < 2:
        raise BadInput("no speculative setting of the grid plans on this config: " + "; ".join(dropped))
    matrix["axes"][AXIS] = list(settings)
    matrix["bundles"][AXIS] = settings
    base_config = {"id": winner.get("id"), "host": winner.get("host"), "flags": flags,
                   "setting": spec_view.spec_setting(flags)}  # fmt: skip
    return StagePlan(matrix, base_config, settings, dropped)


def sweep_request(request: StageRequest, stage: StagePlan, source: str) -> SweepRequest:
    return SweepRequest(
        inventory=request.inventory,
        matrix=stage.matrix,
        matrix_source=f"speculative stage of run {request.base_run} ({source})",
        run_id=request.run_id,
        command="sweep",
        limit=request.limit,
        strategy=request.strategy,
        forks=request.forks,
        node_results_dir=request.node_results_dir,
        quiet=request.quiet,
        node_env=dict(request.node_env),
        extra_vars=list(request.extra_vars),
        verbosity=request.verbosity,
    )


def link_record(request: StageRequest, stage: StagePlan) -> dict[str, Any]:
    return {
        "base_run": request.base_run,
        "base_config": {k: stage.base_config[k] for k in ("id", "host", "setting")},
        "objective": stage.matrix["objective"],
        "loads": [w["name"] for w in stage.matrix["workloads"]],
        "settings": stage.settings,
        "dropped": stage.dropped,
    }


def read_link(run_id: str) -> dict[str, Any] | None:
    """A stage run's link to its base run (speculative_stage.json), None for another run."""
    return spec_view.read_link(store.run_dir(run_id))


def prepare(request: StageRequest) -> tuple[StagePlan, SweepRequest]:
    """Everything before anything launches: BadInput for a base run or grid that cannot be used."""
    base, winner, source = base_winner(request.base_run)
    stage = stage_plan(request, base, winner, source)
    return stage, sweep_request(request, stage, source)


def run_stage(request: StageRequest, prepared: tuple[StagePlan, SweepRequest] | None = None) -> StageOutcome:
    """Sweep the stage (after `prepare`, or preparing it here), link it to the base run."""
    stage, sweep = prepared or prepare(request)
    link = link_record(request, stage)
    folder: Path = ansible_run.private_data_dir(request.run_id).parent  # the run's folder, private
    (folder / LINK_FILE).write_text(json.dumps(link, indent=1), encoding="utf-8")
    outcome = sweep_service.run_sweep(sweep)
    _tag(request)
    rows = spec_view.speculative_rows(outcome.output) if outcome.output is not None else []
    return StageOutcome(outcome, stage, rows, spec_view.conclusion(rows), link)


def _tag(request: StageRequest) -> None:
    try:
        conn = store.connect()
    except store.DB_INPUT_ERRORS:
        return
    try:
        for tag in (TAG, f"{TAG}-of:{request.base_run}"):
            try:
                store.tag_run(conn, request.run_id, tag)
            except store.UnknownRunError:
                return  # nothing was imported: no run to tag
    finally:
        conn.close()
