# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A sweep's state and its results lines: one line per config, written before the next launch."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import correctness
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import (
    node_outcome,
    results_contract,
    results_file,
    results_line,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_failures import SweepFailed
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_request import SweepOptions

# The name of the screening workload in a result's metrics (strategy "screen").
SCREEN = results_contract.SCREEN_WORKLOAD


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class SweepCore:
    """A sweep's state (options, plan, results file, scores) and the line it writes per config."""

    def __init__(self, options: SweepOptions, the_plan: dict[str, Any]) -> None:
        self.options = options
        self.plan = the_plan
        self.configs = {c["id"]: c for c in the_plan["configs"]}
        # The plan's workloads carry every key with its default written out: the one definition.
        self.workloads = {launch["config"]: launch["workloads"] for launch in the_plan["launches"]}
        self.objective = strategies.Objective.from_matrix({**options.matrix, **the_plan})
        self.scores = strategies.Scoreboard(self.objective)
        self.results = results_file.ResultsFile(options.results_path)
        # Every line records its hardware group (model, count, SM, interconnect) from the
        # node's GPU facts (the stand-in's fake nvidia-smi gives them too), SM as the plan's.
        self.hardware = results_line.hardware_of((options.facts or {}).get("gpu"), the_plan.get("gpu"))
        self.reference: list[dict[str, Any]] | None = None
        # The gate under load: the workloads' own sampled outputs (correctness.OutputAudit).
        self.output_audit = correctness.OutputAudit()
        self.lines: list[dict[str, Any]] = []
        # This run's lines the results file held at the start (a resume's): with self.lines,
        # every line of the run, which the outcome returns and a lost file is restored from.
        self.earlier: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self._file_seen: Any | None = None  # (device, inode, size) after our last write
        self.launches = 0

    # -- one line per config -----------------------------------------------------------

    def _line(self, config: dict[str, Any], status: str, **extra: Any) -> dict[str, Any]:
        """A results line (results_contract.make_line: every field, nothing unknown)."""
        fields: dict[str, Any] = {
            "run_id": self.options.run_id,
            "host": self.options.node,
            "config_id": config["id"],
            "point": config.get("point", {}),
            "flags": config.get("flags", {}),
            "argv": list(config.get("argv", [])),
            "launch_command": list(self.options.launch_command),
            "status": status,
            "simulated": self.options.simulated,
            "stack_fingerprint": self.options.fingerprint,
            "stack": self.options.stack_components,
            "gpu": self.plan.get("gpu"),
            "hardware": dict(self.hardware),
            "sglang_version": self.plan.get("sglang_version"),
            "finished_at": now(),
            "reasons": config.get("reasons", []),
            # What it was measured for: an import without the matrix ranks by it, not a default.
            "objective": self.objective.as_dict(),
        }
        fields.update(extra)
        return results_contract.make_line(**fields)

    def _record(self, line: dict[str, Any]) -> None:
        try:
            self._keep_file()
            self.results.append(line)
            self._file_seen = file_state(self.results.path)
        except OSError as exc:
            raise SweepFailed(
                "cannot write %s: %s; the config %s was measured but not recorded"
                % (self.results.path, exc.strerror or exc, line.get("config_id")),
                partial=self._partial(),
            ) from None
        self.scores.record(line)
        self.lines.append(line)

    # -- the run ------------------------------------------------------------------------

    def _partial(self) -> dict[str, Any]:
        return node_outcome.partial(self.earlier + self.lines)

    def _keep_file(self) -> None:
        """A results file removed or replaced while the sweep runs gets back every line of
        the run the sweep holds (each once), with a warning: a later resume finds them
        instead of measuring them again."""
        if self._file_seen is None or file_state(self.results.path) == self._file_seen:
            return
        try:
            present, _problems = self.results.read_checked()
        except results_file.ResultsFileError:
            present = []
        missing = [line for line in self.earlier + self.lines if line not in present]
        if not missing:
            self._file_seen = file_state(self.results.path)
            return
        for line in missing:
            self.results.append(line)
        self._file_seen = file_state(self.results.path)
        self.warnings.append(
            "the results file %s was removed or replaced while the sweep ran: the %d lines of "
            "run %s it lost were written to it again from the sweep's memory"
            % (self.results.path, len(missing), self.options.run_id)
        )

    def screen_workload(self, workloads: list[dict[str, Any]]) -> dict[str, Any]:
        """A short version of the objective's workload: same shape, fewer and shorter requests."""
        return strategies.screen_workload(workloads, self.objective.workload)

    def _screen_passes(self, screen_metrics: dict[str, Any]) -> bool:
        """Full workloads only for a screen not worse than the best recorded (resumed lines too)."""
        return strategies.screen_gate(self.scores, screen_metrics)


def file_state(path: str) -> Any | None:
    """What tells a file from its replacement: (device, inode, size), None when it is gone."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size)
