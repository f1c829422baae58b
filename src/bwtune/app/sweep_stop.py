"""Stopping a run on its nodes (`bwtune cancel`, a cancelled sweep) and finding where it
still runs (a resume the node refused)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import ansible_run, exit_codes
from bwtune.app.sweep_inputs import ATTACH_PLAYBOOK, CANCEL_PLAYBOOK, SweepOutcome, SweepRequest
from bwtune.progress import FOLLOW_TASK


def cancel_outcome(request: SweepRequest, pdd: Path) -> SweepOutcome:
    """A sweep the user cancelled: stopped on the nodes, and how to resume it."""
    messages = stop_run(request, pdd)
    messages.append(f"resume with: {request.resume_command()}")
    return SweepOutcome(request.run_id, exit_codes.CANCELED, messages=messages)


@dataclass
class StopOutcome:
    """What the cancel playbook did on each node of a run."""

    run_id: str
    stopped: list[str] = field(default_factory=list)  # hosts where the run's sweep was stopped
    not_running: dict[str, str] = field(default_factory=dict)  # host -> why there was nothing to stop
    # One line each: a host that failed, or why the playbook did not run.
    failures: list[str] = field(default_factory=list)

    def messages(self) -> list[str]:
        lines = list(self.failures)
        lines += [
            f"run {self.run_id} {why} on {host}: nothing to stop" for host, why in self.not_running.items()
        ]
        if self.stopped or not self.not_running:
            lines.append(f"cancelled run {self.run_id}; stopped on: {', '.join(self.stopped) or 'no host'}")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return contract.versioned(
            {"run_id": self.run_id, "stopped": self.stopped, "not_running": self.not_running,
             "failures": self.failures}
        )  # fmt: skip


def stop_run(request: SweepRequest, pdd: Path) -> list[str]:
    """Run the cancel playbook for the run: each node stops its sweep and its server."""
    return stop_outcome(request, pdd).messages()


def stop_outcome(request: SweepRequest, pdd: Path) -> StopOutcome:
    """stop_run's outcome, host by host."""

    def cancel_in(folder: Path) -> ansible_run.PlaybookRun:
        return ansible_run.run_playbook(
            CANCEL_PLAYBOOK,
            request.inventory,
            request.run_extravars(),
            limit=request.limit,
            forks=request.forks,
            private_data_dir=folder,
            quiet=True,
            verbosity=request.verbosity,
            extra_args=request.extra_args(),
        )

    try:
        stop = cancel_in(pdd)
    except ansible_run.ArtifactWriteError as err:
        # BWTUNE_HOME is full: the nodes must be stopped all the same. Its events go to a
        # private folder outside it, removed after.
        scratch = Path(tempfile.mkdtemp(prefix=f"bwtune-cancel-{request.run_id}-"))
        try:
            stop = cancel_in(scratch)
        except ansible_run.ArtifactWriteError as again:
            return StopOutcome(
                request.run_id,
                failures=[
                    f"cancel playbook: {err}; and {again}: the run's sweep may still run on the nodes: "
                    f"free some space, then `bwtune cancel {request.run_id}`"
                ],
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    outcome = StopOutcome(request.run_id, failures=[failure.line() for failure in stop.failures.values()])
    if stop.error:
        outcome.failures.append(f"cancel playbook: {stop.error}")
    # Each node says whether the run's sweep was running there (sweep_progress's `cancel`).
    said = {host: res.get("cancel") or {} for host, res in stop.results("sweep_progress").items()}
    for host, cancel in sorted(said.items()):
        if cancel.get("cancelled") is False:
            reason = cancel.get("reason") or "no running sweep"
            why = "already finished" if reason == "no running sweep" else f"is not running ({reason})"
            outcome.not_running[host] = why
    outcome.stopped = sorted(set(stop.hosts) - set(stop.failures) - set(outcome.not_running))
    return outcome


def explain_still_running(request: SweepRequest, outcome: SweepOutcome) -> None:
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
    look = ansible_run.run_playbook(
        ATTACH_PLAYBOOK,
        request.inventory,
        extravars,
        limit=request.limit,
        private_data_dir=ansible_run.private_data_dir(request.run_id),
        quiet=True,
        extra_args=request.extra_args(),
    )
    return {
        host: dict(res.get("progress") or {})
        for host, res in look.results("sweep_progress", task=FOLLOW_TASK).items()
        if res.get("finished") is False and (res.get("progress") or {}).get("run_id")
    }
