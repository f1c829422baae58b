# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The plan as a few lines of text: what `ansible-playbook --check` shows without -v."""

from __future__ import annotations


def _cell(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _note(config):
    reasons = config.get("reasons") or []
    if reasons:
        first = reasons[0]
        more = " (+%d)" % (len(reasons) - 1) if len(reasons) > 1 else ""
        return "%s: %s%s" % (first.get("kind"), first.get("rule"), more)
    if config.get("duplicate_of"):
        return "same launch as %s" % config["duplicate_of"]
    return ""


def plan_table(plan):
    """One line per config (id, axis values, status, first reason), a header and a summary."""
    configs = list(plan.get("configs") or [])
    axes = []
    for config in configs:
        axes.extend(axis for axis in (config.get("point") or {}) if axis not in axes)
    headers = ["id", *axes, "status", "reason"]
    rows = [
        [
            config.get("id"),
            *(_cell((config.get("point") or {}).get(a, "")) for a in axes),
            config.get("status"),
            _note(config),
        ]
        for config in configs
    ]
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = ["SGLang %s on %s: %s" % (plan.get("sglang_version"), plan.get("gpu"), plan.get("model_path"))]
    for row in [headers, ["-" * w for w in widths], *rows]:
        lines.append("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    summary = plan.get("summary") or {}
    if summary:
        lines.append(
            "%s configs: %s valid, %s pruned, %s duplicates; %s launches x %s workloads"
            % (
                summary.get("expanded"),
                summary.get("valid"),
                summary.get("pruned"),
                summary.get("duplicates"),
                summary.get("launches"),
                summary.get("workloads_per_launch"),
            )
        )
    return lines


class FilterModule:
    def filters(self):
        return {"plan_table": plan_table}
