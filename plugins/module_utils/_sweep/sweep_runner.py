# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The node-side sweep: plan, then launch, gate, measure, stop and record each config.

Every config of the plan ends as exactly one line of the results file, written and
fsync'd before the next launch starts: measured configs with their metrics, failed
ones with their failure class and log tail, pruned and duplicate ones with the
planner's reasons. A failed config never stops the sweep; a server that will not go
away does (``SweepFailed``), because every later measurement would be wrong.

Its parts: sweep_request (the options and the plan), sweep_core (state and lines), sweep_resume,
config_launch (one launch), sweep_locks and sweep_failures.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import node_outcome, results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies
from ansible_collections.bwtune.sglang.plugins.module_utils._server import launcher
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_state
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.config_launch import ConfigLaunch
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_core import file_state
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_failures import (
    Cancelled,
    SweepFailed,
    raise_cancelled,
    writing,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_locks import lock_node, lock_results
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_request import (
    BadInput,
    SweepOptions,
    make_plan,
    prior_scores,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_resume import ResumeChecks

# What the sweep module and the controller's tests call by this module's name.
__all__ = [
    "BadInput",
    "Cancelled",
    "Sweep",
    "SweepFailed",
    "SweepOptions",
    "make_plan",
    "prior_scores",
    "run_sweep",
]


class Sweep(ResumeChecks, ConfigLaunch):
    """One sweep process: its options, plan, results file and progress (sweep_core); a
    resume's checks (sweep_resume); each config's launch (config_launch); here, the run."""

    # -- the run ------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        # This run first (a resume of a run still running says so), then the node.
        self._lock = lock_results(self.options.results_path)
        self._node_lock = lock_node(self.options)
        # The run's folder and its logs are the sweep's user's only (0700): logs are masked,
        # but what a server prints about its configuration is nobody else's business.
        writing(self.options.log_dir, launcher.private_dirs, os.path.dirname(self.options.log_dir))
        writing(self.options.log_dir, launcher.private_dirs, self.options.log_dir)
        sweep_state.remove_stale_tmp(self.options.results_path)
        leftover = sweep_state.stop_leftovers(self.options.results_path)
        on_file, problems = self.results.read_checked()
        self.warnings += ["%s: it is measured again" % problem for problem in problems]
        self.earlier = [line for line in on_file if line.get("run_id") == self.options.run_id]
        self._file_seen = file_state(self.results.path)
        self._check_resume(self.earlier)
        previous = {} if self.options.force else self.results.measured(self.options.fingerprint, on_file)
        if previous:
            # Every launch so far, re-measures included (a strategy pools them), in file order.
            for line in on_file:
                launched = results_contract.is_launched(line.get("status"))
                if (
                    launched
                    and line.get("config_id") in previous
                    and line.get("stack_fingerprint") == self.options.fingerprint
                ):
                    self.scores.record(line)
        self._record_unlaunchable(previous)

        order = strategies.run_order(
            self.options.strategy,
            self.plan,
            self.scores,
            self.options.matrix.get("axes") or {},
            self.options.matrix.get("baseline"),
            prior=prior_scores(self.options.prior, self.plan),
        )
        # A fleet sweep's share (only_configs): the plan is the whole matrix's, the launches
        # only this node's; the others are another host's, with no line here.
        assigned = self.assigned()
        if self.options.only_configs is not None:  # grid only: its order is the plan's, fixed
            order = iter([config_id for config_id in order if config_id in assigned])
        self._check_file_lost(on_file)
        planned = len(assigned) - len(assigned & set(previous))
        try:
            progress = sweep_state.Progress(self.options.results_path, self.options.run_id, planned)
        except sweep_state.WriteFailed as exc:
            raise SweepFailed(str(exc)) from None
        signal.signal(signal.SIGTERM, raise_cancelled)
        error = None
        try:
            for config_id in order:
                # A strategy that re-measures (adaptive) names only what it still needs.
                if config_id in previous and self.options.strategy not in strategies.REMEASURING:
                    continue
                started = time.monotonic()
                line = self.launch(self.configs[config_id], progress)
                self._record(line)
                self.launches += 1
                progress.config_done(line["status"] != "ok", time.monotonic() - started)
        except Cancelled:
            error = "cancelled: the sweep was stopped; %d configs finished are in %s" % (
                self.launches,
                self.options.results_path,
            )
        except sweep_state.WriteFailed as exc:
            raise SweepFailed(
                "%s; the %d configs finished before are in %s"
                % (exc, self.launches, self.options.results_path),
                partial=self._partial(),
            ) from None
        try:
            self._keep_file()
        except OSError as exc:
            self.warnings.append(
                "cannot restore %s: %s; every line of the run is in this result only"
                % (self.results.path, exc.strerror or exc)
            )
        outcome = self.outcome(previous, leftover, error)
        try:
            progress.finish(outcome)
        except sweep_state.WriteFailed as exc:
            raise SweepFailed(str(exc), partial=outcome) from None
        return outcome

    def assigned(self) -> set[str]:
        """The plan's launches this node runs: its only_configs, else every one."""
        launches = {launch["config"] for launch in self.plan["launches"]}
        if self.options.only_configs is None:
            return launches
        return launches & set(self.options.only_configs)

    def outcome(self, previous: dict[str, Any], leftover: Any, error: str | None) -> dict[str, Any]:
        # Every line of the run, in the order written: earlier launches of a re-measured
        # config and a resumed run's pruned and duplicate lines too (each reaches the
        # database, attempts in order).
        lines = [line for line in self.earlier + self.lines if line.get("run_id") == self.options.run_id]
        latest = {line["config_id"]: line for line in lines}
        counts: dict[str, int] = {}
        for line in latest.values():
            counts[line["status"]] = counts.get(line["status"], 0) + 1
        best_id = self.scores.best(list(latest))
        best = self.scores.results.get(best_id) if best_id is not None else None
        valid = len(self.plan["launches"])
        # The plan's launches the run never made: the strategy left them out (a finished
        # run), or the sweep stopped before them. Every config of the plan is then accounted
        # for: a line, or one of these.
        measured = {line["config_id"] for line in lines if results_contract.is_launched(line["status"])}
        assigned = self.assigned()
        unlaunched = [
            {"config": c["config"], "point": self.configs.get(c["config"], {}).get("point", {})}
            for c in self.plan["launches"]
            if c["config"] not in measured and c["config"] in assigned
        ]
        # Its keys and the outcome's: node_outcome (the filter and the controller read them so).
        summary = node_outcome.make_summary(
            run_id=self.options.run_id,
            strategy=self.options.strategy,
            planned_configs=len(self.plan["configs"]),
            valid_configs=valid,
            launches=self.launches,
            resumed=len(previous),
            saved_launches=max(len(assigned) - self.launches - len(assigned & set(previous)), 0),
            screened_out=sum(1 for line in self.lines if line.get("screened_out")),
            by_status=counts,
            objective={
                "workload": self.objective.workload,
                "metric": self.objective.metric,
                "goal": self.objective.goal,
            },
            simulated=self.options.simulated,
            leftover_stopped=leftover,
            results_path=self.options.results_path,
            warnings=list(self.warnings),
            **{("not_reached" if error else "left_out"): unlaunched},
        )
        return node_outcome.finished(results=lines, best=best, summary=summary, error=error)


def run_sweep(options: SweepOptions, the_plan: dict[str, Any]) -> dict[str, Any]:
    return Sweep(options, the_plan).run()
