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
from typing import Any

from bwtune import ansible_run, exit_codes, store
from bwtune.app.sweep_collect import collect, node_results, one_line, unlaunched, write_reports
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
    request: SweepRequest, playbook: str, extravars: dict[str, Any], verb: str
) -> ansible_run.PlaybookRun:
    """Run a playbook with the live view (progress on stderr) and Ctrl-C handling."""
    pdd = ansible_run.private_data_dir(request.run_id)
    hosts = request.inventory.hosts
    state = SweepState.for_hosts({host: request.inventory.simulated(host) for host in hosts})
    if playbook == ATTACH_PLAYBOOK:
        state.ctrl_c = "Ctrl-C stops following (the nodes go on)"
    title = f"bwtune: {verb} run {request.run_id} on {len(hosts)} host(s)"
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
