# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A resumed run's checks: the same host, the same workloads, lines a lost file lacks, pruned lines."""

from __future__ import annotations

from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import bench_client
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_state
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_core import SCREEN, SweepCore
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_failures import SweepFailed


class ResumeChecks(SweepCore):
    """What a resumed run checks and records before it launches anything."""

    def _check_file_lost(self, on_file: list[dict[str, Any]]) -> None:
        """Say plainly when a resume will measure again what the run measured before: the
        sweep that ran before here made more launches than the results file now holds (it was
        removed or cut after that sweep ended)."""
        before = sweep_state.read_progress(self.options.results_path) or {}
        if before.get("run_id") != self.options.run_id:
            return
        made = int(before.get("done") or 0)
        held = sum(
            1
            for line in on_file
            if line.get("run_id") == self.options.run_id and results_contract.is_launched(line.get("status"))
        )
        if made > held:
            self.warnings.append(
                "the results file %s holds %d launches of run %s, but the sweep that ran here before "
                "made %d: the file was removed or cut after it; the configs it lacks are measured "
                "again now (the results database keeps what it stored of the earlier launches)"
                % (self.results.path, held, self.options.run_id, made)
            )

    def _check_resume(self, earlier: list[dict[str, Any]]) -> None:
        """Refuse a resume whose lines cannot be told apart from this run's or ranked with
        them: another host name for this node, or workloads that changed since they were
        measured. Nothing is launched."""
        run_id = self.options.run_id
        hosts = sorted({str(line.get("host")) for line in earlier} - {self.options.node})
        if hosts:
            raise SweepFailed(
                "run %s was measured on this node as host %s (%s), but this inventory calls it %r: "
                "resume it with the inventory that started it (the same host name), or start a "
                "new run"
                % (run_id, " and ".join(repr(h) for h in hosts), self.results.path, self.options.node)
            )
        if self.options.force:
            return
        changes: dict[str, list[str]] = {}
        configs: dict[str, None] = {}
        for line in earlier:
            if line.get("status") != results_contract.OK or line.get("config_id") not in self.workloads:
                continue
            for change in self._workload_changes(line):
                changes.setdefault(change, [])
                configs[str(line["config_id"])] = None
        if changes:
            raise SweepFailed(
                "run %s: the matrix's workloads changed since %d configs were measured (%s): "
                "results measured under different workloads are never ranked together; measure "
                "them again with the new workloads (bwtune sweep --resume %s --force), or start a "
                "new run (bwtune sweep MATRIX) to keep both"
                % (
                    run_id,
                    len(configs),
                    "; ".join(sorted(changes)),
                    run_id,
                )
            )

    def _workload_changes(self, line: dict[str, Any]) -> list[str]:
        """What differs between the workloads a line was measured with and this plan's."""
        planned = {w["name"]: _workload_key(w) for w in self.workloads[line["config_id"]]}
        if self.options.strategy in strategies.REMEASURING or SCREEN in (line.get("metrics") or {}):
            screen = self.screen_workload(self.workloads[line["config_id"]])
            planned[SCREEN] = _workload_key(screen)
        changes = []
        measured = line.get("metrics") or {}
        for name, block in measured.items():
            before = (block or {}).get("workload")
            if not isinstance(before, dict):
                continue
            if name not in planned:
                changes.append("workload %r is no longer in the matrix" % name)
                continue
            after = planned[name]
            before = _workload_key(before)
            diff = [
                "%s %s -> %s" % (key, before.get(key), after.get(key))
                for key in sorted(set(before) | set(after))
                if key != "name" and before.get(key) != after.get(key)
            ]
            if diff:
                changes.append("workload %r: %s" % (name, ", ".join(diff)))
        if not line.get("screened_out"):
            for name in planned:
                if name != SCREEN and name not in measured:
                    changes.append("workload %r is new" % name)
        return changes

    def _record_unlaunchable(self, previous: dict[str, Any]) -> None:
        """Pruned and duplicate configs get their line once, so the results file is the whole plan."""
        recorded = self.results.config_ids(self.options.run_id)
        for config in self.plan["configs"]:
            if config["status"] in results_contract.NOT_LAUNCHED and config["id"] not in recorded:
                if config["status"] == "pruned":
                    message = "; ".join(reason["message"] for reason in config.get("reasons", []))
                else:
                    message = "same launch as %s" % config.get("duplicate_of")
                failure = {"class": config["status"], "message": message, "log_tail": []}
                self._record(
                    self._line(
                        config, config["status"], failure=failure, duplicate_of=config.get("duplicate_of")
                    )
                )


def _workload_key(workload: dict[str, Any]) -> dict[str, Any]:
    """A workload with every key written out (bench_client.Workload), to compare two."""
    try:
        return bench_client.Workload.from_dict(workload).to_dict()
    except (TypeError, ValueError, KeyError):
        return dict(workload)
