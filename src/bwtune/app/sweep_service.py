"""The sweep service: a sweep run through ansible-runner, from its request to its outcome.

Starting (and resuming) a run and following it live, attaching to one its nodes still
sweep; the request and outcome are `sweep_inputs`, the prior `sweep_prior`, cancelling
`sweep_stop`, importing what the nodes returned, the reports and the exit code
`sweep_collect`. `bwtune sweep` (and `demo`, `regress`, `recipe`, `cancel`) build a typed
`SweepRequest` from their options, call this and render the outcome; nothing here parses
a command line or prints but the live view. The names of those modules the callers use are
here too.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import node_outcome
from bwtune import ansible_run, exit_codes, store
from bwtune.app import facts_service
from bwtune.app.sweep_collect import (
    collect,
    finish_fleet,
    gathered_gpus,
    host_lines,
    node_results,
    one_line,
    store_lines,
    stored_configs,
    unlaunched,
    write_reports,
)
from bwtune.app.sweep_inputs import (
    ATTACH_PLAYBOOK,
    AUTO_NEEDS_FACTS,
    CANCEL_PLAYBOOK,
    FOLLOW_S,
    NODE_RESULTS_DIR,
    STRATEGIES,
    SWEEP_PLAYBOOK,
    BadInput,
    NothingToLaunch,
    SweepOutcome,
    SweepRequest,
    load_matrix,
    load_settings,
    saved_matrix,
    unknown_run,
)
from bwtune.app.sweep_prior import read_prior
from bwtune.app.sweep_stop import (
    StopOutcome,
    cancel_outcome,
    explain_still_running,
    still_running,
    stop_outcome,
    stop_run,
)
from bwtune.fleet import costs, fleet_run, shares
from bwtune.progress import FOLLOW_TASK, ProgressView, SweepState

__all__ = [
    "ATTACH_PLAYBOOK",
    "AUTO_NEEDS_FACTS",
    "CANCEL_PLAYBOOK",
    "FOLLOW_S",
    "FOLLOW_TASK",
    "NODE_RESULTS_DIR",
    "STRATEGIES",
    "SWEEP_PLAYBOOK",
    "BadInput",
    "NothingToLaunch",
    "StopOutcome",
    "SweepOutcome",
    "SweepRequest",
    "attach",
    "collect",
    "load_matrix",
    "load_settings",
    "node_results",
    "one_line",
    "read_prior",
    "run_sweep",
    "saved_matrix",
    "still_running",
    "stop_outcome",
    "stop_run",
    "unknown_run",
    "unlaunched",
    "write_reports",
]


def run_sweep(request: SweepRequest) -> SweepOutcome:
    """Run the sweep playbook, follow it, import what it returned and write the reports."""
    pdd = ansible_run.private_data_dir(request.run_id)
    (pdd.parent / "matrix.json").write_text(json.dumps(request.matrix, indent=1), encoding="utf-8")
    request.settings().save(request.run_id)
    request.prior = read_prior(request)
    verb = "resuming" if request.resumed else "sweeping"
    if fleet_run.applies(request.strategy, request.inventory.hosts):
        return _run_fleet(request, verb)
    if request.resumed and (store.run_dir(request.run_id) / fleet_run.STATE_FILE).is_file():
        # Every host would run the whole plan: each launch measured again on each host.
        return SweepOutcome(
            request.run_id,
            exit_codes.BAD_INPUT,
            messages=[
                f"--resume {request.run_id}: the run is a fleet sweep (its grid shared among "
                f"{', '.join(request.inventory.hosts)}); resume it with --strategy grid on more than one "
                f"host, not --strategy {request.strategy} on {len(request.inventory.hosts)}"
            ],
        )
    try:
        playbook_run = _follow(request, SWEEP_PLAYBOOK, request.extravars(), verb)
    except ansible_run.ArtifactWriteError as err:
        return _artifacts_unwritable(request, err)
    if playbook_run.canceled:
        return cancel_outcome(request, pdd)
    outcome = collect(request, playbook_run)
    if request.resumed and outcome.exit_code == exit_codes.HOST_FAILED:
        explain_still_running(request, outcome)
    return outcome


def attach(request: SweepRequest) -> SweepOutcome:
    """Follow a run its nodes are still sweeping; keep its results when it ends.

    Ctrl-C stops following only: the nodes go on, as they did when bwtune was gone.
    """
    follow = {**request.run_extravars(), "sweep_follow_s": FOLLOW_S}
    try:
        playbook_run = _follow(request, ATTACH_PLAYBOOK, follow, "following")
    except ansible_run.ArtifactWriteError as err:
        return _artifacts_unwritable(request, err)
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
    return collect(request, playbook_run)


def _artifacts_unwritable(request: SweepRequest, err: ansible_run.ArtifactWriteError) -> SweepOutcome:
    """BWTUNE_HOME filled up (or became read-only) while the playbook ran: it was stopped;
    the nodes keep their results, and a sweep that had not finished goes on there."""
    line = store.storage_failure_message(err, request.run_id, request.node_results_paths())
    line += (
        f"; a node whose sweep had not finished goes on: once there is space, "
        f"`bwtune sweep --attach {request.run_id}` follows it and stores its results "
        f"(`bwtune cancel {request.run_id}` stops it)"
    )
    return SweepOutcome(request.run_id, exit_codes.HOST_FAILED, messages=[line])


def _follow(
    request: SweepRequest,
    playbook: str,
    extravars: dict[str, Any],
    verb: str,
    *,
    limit: str | None = None,
    state: SweepState | None = None,
    title: str | None = None,
) -> ansible_run.PlaybookRun:
    """Run a playbook with the live view (progress on stderr) and Ctrl-C handling."""
    pdd = ansible_run.private_data_dir(request.run_id)
    hosts = request.inventory.hosts
    if state is None:
        state = SweepState.for_hosts({host: request.inventory.simulated(host) for host in hosts})
    if playbook == ATTACH_PLAYBOOK:
        state.ctrl_c = "Ctrl-C stops following (the nodes go on)"
    title = title or f"bwtune: {verb} run {request.run_id} on {len(hosts)} host(s)"
    # With -v ansible-playbook's own output goes to stderr too: lines, not a live table.
    live = False if request.verbosity else None
    with (
        ansible_run.cancel_on_interrupt() as cancel,
        ProgressView(state, title, quiet=request.quiet, live=live) as view,
    ):
        playbook_run = ansible_run.run_playbook(
            playbook,
            request.inventory,
            extravars,
            limit=limit or request.limit,
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


# --------------------------------------------------------------------------- fleet sweeps
# docs/fleet.md: a grid on several hosts is shared out per hardware group (bwtune.fleet).

PLAN_TASK = "Plan the sweep"  # roles/sweep/tasks/sweep.yml: the node's plan, in check mode


def _run_fleet(request: SweepRequest, verb: str) -> SweepOutcome:
    """Plan on every host, share each group's launches, run rounds until every launch is
    finished or has no host left; a lost host's unfinished launches go to its group."""
    run_dir = store.run_dir(request.run_id)
    messages: list[str] = []
    code = exit_codes.OK
    try:
        state = fleet_run.FleetState.load(run_dir) if request.resumed else None
    except fleet_run.FleetError as err:
        return SweepOutcome(request.run_id, exit_codes.BAD_INPUT, messages=[str(err)])
    gathered: dict[str, Any] = {}
    if state is None:
        try:
            planned = _plan_fleet(request, messages, gathered)
        except ansible_run.ArtifactWriteError as err:
            return _artifacts_unwritable(request, err)
        if isinstance(planned, SweepOutcome):
            return planned
        state = planned
        if messages:  # a host that could not plan has no share: the run is not the whole fleet's
            code = exit_codes.HOST_FAILED
        state.save(run_dir)
    elif sorted(set(state.hosts()) - set(request.inventory.hosts)):
        missing = sorted(set(state.hosts()) - set(request.inventory.hosts))
        return SweepOutcome(
            request.run_id,
            exit_codes.BAD_INPUT,
            messages=[
                f"--resume {request.run_id}: the fleet sweep shared its launches with host "
                f"{', '.join(missing)}, which the inventory no longer has: resume with the inventory "
                "(and --limit) that started it"
            ],
        )
    progress = SweepState.for_hosts({host: request.inventory.simulated(host) for host in state.hosts()})
    progress.fleet = True
    for group in state.groups:
        for host in group.hosts:
            progress.host(host).planned = len(group.by_host[host])
    stored = stored_configs(request.run_id)
    done: dict[str, set[str]] = {host: set(configs) for host, configs in stored.items()}
    by_host: dict[str, dict[str, Any]] = {}
    held: set[str] = set()  # hosts where the run still runs (a resume): followed, not reassigned
    first = True
    plan_summary: dict[str, Any] | None = None
    while True:
        todo = {h: ids for h, ids in state.todo(done).items() if h not in held}
        if first and request.force:  # --force measures the share again, finished or not
            todo = {
                h: state.share_of(h) for h in state.hosts() if h not in state.lost() and state.share_of(h)
            }
        if not todo:
            break
        first = False
        state.rounds += 1
        state.save(run_dir)
        extravars = {**request.extravars(), "sweep_fleet_shares": todo}
        title = (
            f"bwtune: {verb} run {request.run_id}, fleet round {state.rounds}: "
            f"{sum(map(len, todo.values()))} launches on {len(todo)} of {len(state.hosts())} host(s)"
        )
        try:
            playbook_run = _follow(
                request,
                SWEEP_PLAYBOOK,
                extravars,
                verb,
                limit=",".join(sorted(todo)),
                state=progress,
                title=title,
            )
        except ansible_run.ArtifactWriteError as err:
            return _artifacts_unwritable(request, err)
        if playbook_run.canceled:
            return cancel_outcome(request, ansible_run.private_data_dir(request.run_id))
        round_messages = [failure.line() for failure in playbook_run.failures.values()]
        if playbook_run.error:  # no host ran: nothing to reassign, nothing learnt of any host
            messages += [*round_messages, f"the sweep playbook did not run: {playbook_run.error}"]
            code = exit_codes.HOST_FAILED
            break
        returned = node_results(playbook_run)
        lines_by_host: dict[str, list[dict[str, Any]]] = {}
        for host, result in sorted(returned.items()):
            round_messages, good, bad = host_lines(host, result, round_messages)
            lines_by_host[host] = good
            if bad:
                code = exit_codes.HOST_FAILED
            by_host[host] = result
            plan_summary = plan_summary or node_outcome.summary_of(result) or None
        kept, dropped = fleet_run.merge(state, lines_by_host, stored)
        round_messages += dropped
        gathered.update(gathered_gpus(playbook_run, returned))
        try:
            replaced = store_lines(
                request, [line for h in sorted(kept) for line in kept[h]], gathered, plan_summary
            )
        except (sqlite3.Error, OSError, store.StorageError) as err:
            paths = {host: path for host, path in request.node_results_paths().items() if host in returned}
            messages += [*round_messages, store.storage_failure_message(err, request.run_id, paths)]
            return SweepOutcome(request.run_id, exit_codes.HOST_FAILED, messages=messages)
        round_messages += [f"replaced: {replacement.line()}" for replacement in replaced]
        for host, lines in kept.items():
            done.setdefault(host, set()).update(fleet_run.launched_ids(lines))
            stored.setdefault(host, set()).update(str(line.get("config_id")) for line in lines)
        # A host with launches of its share left after its round is lost: they move.
        unfinished = {h: ids for h, ids in state.todo(done).items() if h in todo}
        if unfinished and request.resumed:
            running = still_running(request)
            for host in sorted(set(unfinished) & set(running)):
                held.add(host)
                del unfinished[host]
                code = exit_codes.HOST_FAILED
                round_messages = [
                    m for m in round_messages if not m.startswith((f"host {host} ", f"host {host}:"))
                ]
                round_messages.append(
                    f"run {request.run_id} is still running on {host}: its launches stay its own; "
                    f"follow it with `bwtune sweep --attach {request.run_id}`, "
                    f"or stop it with `bwtune cancel {request.run_id}`"
                )
        for host in sorted(unfinished):
            why = next((m for m in round_messages if m.startswith((f"host {host} ", f"host {host}:"))), None)
            why = why or f"host {host} ended its round with {len(unfinished[host])} launches unfinished"
            try:
                entry = state.lose(host, done.get(host, ()), why)
            except shares.SharesError as err:
                round_messages.append(f"{err}: they are not measured")
                held.add(host)
                code = exit_codes.HOST_FAILED
                continue
            moved = "; ".join(
                f"{len(ids)} to {other} ({', '.join(ids)})" for other, ids in sorted(entry["to"].items())
            )
            round_messages.append(
                f"reassigned: host {host} is lost after round {state.rounds} ({one_line(why)}); its "
                f"{len(unfinished[host])} unfinished launches go to its group's other hosts: {moved}"
            )
            progress.host(host).failure = "lost: its unfinished launches were reassigned"
        for group in state.groups:
            for host in group.hosts:
                progress.host(host).planned = len(group.by_host[host])
        state.save(run_dir)
        messages += round_messages
    left = sum(len(ids) for ids in state.todo(done).values())
    if left:
        code = exit_codes.HOST_FAILED
        messages.append(
            f"{left} launches of run {request.run_id} have no line: `{request.resume_command()}` goes on"
        )
    rows = fleet_run.progress_rows(
        state, {host: [line for line in _lines_of(by_host.get(host))] for host in state.hosts()}
    )
    fleet = {
        "groups": [
            {
                "key": g.key,
                "hosts": g.hosts,
                "launches": len(g.launches),
                "lost": g.lost,
                "costs": g.cost_sources,
            }
            for g in state.groups
        ],
        "hosts": rows,
        "rounds": state.rounds,
        "reassigned": state.reassigned,
    }
    return finish_fleet(request, by_host, messages, code, fleet)


def _lines_of(result: Any) -> list[dict[str, Any]]:
    return [line for line in node_outcome.lines(result) if isinstance(line, dict)]


def _plan_fleet(
    request: SweepRequest, messages: list[str], gathered: dict[str, Any]
) -> fleet_run.FleetState | SweepOutcome:
    """Round 0: the sweep playbook in check mode on every host, which plans there (the node's
    own plan, from its own facts) and launches nothing; then the groups and their shares."""
    planning = ansible_run.run_playbook(
        SWEEP_PLAYBOOK,
        request.inventory,
        request.extravars(),
        limit=request.limit,
        forks=request.forks,
        private_data_dir=ansible_run.private_data_dir(request.run_id),
        quiet=True,
        envvars=dict(request.node_env),
        verbosity=request.verbosity,
        extra_args=[*request.extra_args(), "--check"],
    )
    if planning.canceled:
        return SweepOutcome(
            request.run_id, exit_codes.CANCELED, messages=["cancelled while planning on the hosts"]
        )
    if planning.error:
        return SweepOutcome(
            request.run_id,
            exit_codes.HOST_FAILED,
            messages=[f"the sweep playbook did not run: {planning.error}"],
        )
    plans = {
        host: res["plan"]
        for host, res in planning.results("sweep", task=PLAN_TASK).items()
        if isinstance(res.get("plan"), Mapping) and host not in planning.failures
    }
    for _host, failure in sorted(planning.failures.items()):
        messages.append(f"{failure.line()} (while planning: it gets no share of the launches)")
    if not plans:
        return SweepOutcome(
            request.run_id, exit_codes.HOST_FAILED, messages=messages or ["no host planned the sweep"]
        )
    facts = facts_service.host_facts(planning)
    gathered.update(gathered_gpus(planning, plans))
    simulated = {host: request.inventory.simulated(host) for host in plans}
    conn = None
    try:
        conn = store.connect()
    except (sqlite3.Error, OSError, store.StorageError):
        conn = None

    def lines_of(group: Any, the_plan: Mapping[str, Any]) -> list[dict[str, Any]]:
        if conn is None:
            return []
        kind = any(simulated.values())
        # Other runs only: a resume (or a second controller) prices the same launches alike.
        return [
            line
            for line in costs.group_lines(conn, group, simulated=kind)
            if line.get("run_id") != request.run_id
        ]

    try:
        state = fleet_run.build(request.run_id, plans, facts, lines_of)
    finally:
        if conn is not None:
            conn.close()
    if len(state.groups) > 1:
        messages.append(
            "warning: the hosts are "
            + f"{len(state.groups)} hardware groups ("
            + "; ".join(f"{', '.join(g.hosts)}: {g.key}" for g in state.groups)
            + "): each group's launches are shared among its own hosts"
        )
    return state
