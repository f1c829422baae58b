# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A node's sweep outcome in a few lines (done, failed by class, best), and whether it measured anything."""

from __future__ import annotations

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import node_outcome
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract


def _counts(counts):
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join("%s %d" % (status, n) for status, n in ordered)


def sweep_summary(outcome):
    """{"lines": [...], "failed": "" or why the host fails: the sweep measured no config}.
    The outcome's keys are module_utils/_contracts/node_outcome's, read through its readers."""
    results = [line for line in node_outcome.lines(outcome) if isinstance(line, dict)]
    summary = node_outcome.summary_of(outcome)
    counts = contract.outcome_counts(results)
    failed, unlaunched = counts["failed"], dict(counts["not_launched"])
    launched = counts["ok"] + sum(failed.values())
    # A strategy that searches (adaptive, coordinate) writes no line for the configs it left
    # out, and a re-measured config has a line per launch: count the plan's configs.
    with_lines = len({line.get("config_id") for line in results})
    configs = max(int(summary.get("planned_configs") or 0), with_lines)
    if configs > with_lines:
        unlaunched["left out by %s" % (summary.get("strategy") or "the strategy")] = configs - with_lines
    sim = " (simulated)" if summary.get("simulated") else ""
    lines = [
        "run %s: %d configs, %d launched, %d measured ok, %d failed, %d not launched%s"
        % (
            summary.get("run_id"),
            configs,
            launched,
            counts["ok"],
            sum(failed.values()),
            sum(unlaunched.values()),
            sim,
        )
    ]
    if failed:
        lines.append("failed by class: %s" % _counts(failed))
    if unlaunched:
        lines.append("not launched: %s" % _counts(unlaunched))
    best = node_outcome.best(outcome)
    objective = summary.get("objective") or {}
    if isinstance(best, dict):
        value = contract.metric_value(best, objective)
        shown = ""
        if value is not None:
            shown = ": %s %s %.1f (%s)" % (
                objective.get("workload"),
                objective.get("metric"),
                value,
                objective.get("goal"),
            )
        point = ", ".join("%s=%s" % kv for kv in sorted((best.get("point") or {}).items()))
        lines.append("best: %s%s%s" % (best.get("config_id"), " [%s]" % point if point else "", shown))
    if summary.get("results_path"):
        lines.append("results: %s" % summary["results_path"])
    why = ""
    if counts["ok"] == 0 and not node_outcome.error(outcome):
        if failed:
            why = "no config was measured: all %d launches failed (%s); the log tails are in %s" % (
                launched,
                _counts(failed),
                summary.get("results_path") or "the results file",
            )
        else:
            why = "no config was measured: none was launched (%s)" % (_counts(unlaunched) or "empty plan")
    return {"lines": lines, "failed": why}


class FilterModule:
    def filters(self):
        return {"sweep_summary": sweep_summary}
