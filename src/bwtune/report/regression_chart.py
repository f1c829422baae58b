"""The report's regression section: per config, its history plotted (the level of each run,
change points as dashed lines, the baseline run marked) and its verdicts. Inline SVG."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from bwtune.report.svg import (
    AXIS_COLOR,
    BAD_COLOR,
    BEST_COLOR,
    PALETTE,
    _fmt,
    _text,
    _watermark,
    nice_ticks,
    tick_labels,
)

VERDICT_COLOR = {"regression": "#b91c1c", "improvement": BEST_COLOR, "no change": AXIS_COLOR,
                 "inconclusive": "#d97706"}  # fmt: skip


def history_chart(
    config: Mapping[str, Any], baseline_run: str | None, *, metric: str, simulated: bool
) -> str:
    """One config's level per run, oldest left; change points dashed; the baseline run ringed."""
    points = [p for p in config["history"] if p.get("level") is not None]
    width, height, left, right, top, bottom = 640, 220, 70, 20, 28, 44
    if not points:
        failed = len(config["history"])
        why = (
            f": {failed} run{'s' if failed != 1 else ''} measured nothing (every launch failed)"
            if failed
            else ""
        )
        return f'<p class="sub">No measured run yet{escape(why)}.</p>'
    levels = [float(p["level"]) for p in points]
    ticks = nice_ticks(min(levels) * 0.98, max(levels) * 1.02, 4)
    low, high = ticks[0], ticks[-1]
    span = max(1, len(points) - 1)

    def sx(i: int) -> float:
        return left + (width - left - right) * (i / span if len(points) > 1 else 0.5)

    def sy(v: float) -> float:
        return top + (height - top - bottom) * (1 - (v - low) / ((high - low) or 1.0))

    parts = [
        f'<svg class="chart regression-history" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="history of {escape(config["config_id"])}">',
        _text(left, 16, f"{config['config_id']} ({config['gpu']}): {metric} per run", weight="bold"),
    ]
    for tick, label in zip(ticks, tick_labels(ticks), strict=True):
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{sy(tick):.1f}" y2="{sy(tick):.1f}" '
                     f'stroke="#e5e7eb"/>')  # fmt: skip
        # Centred on its grid line at any font size; the step's decimals, so 2.5 steps read evenly.
        parts.append(_text(left - 6, sy(tick), label, anchor="end", size=11, middle=True))
    index = {p["run_id"]: i for i, p in enumerate(points)}
    for cp in config.get("change_points") or []:
        if cp["run_id"] in index:
            x = (sx(index[cp["run_id"]]) + sx(index[cp["run_id"]] - 1)) / 2
            color = VERDICT_COLOR.get(cp["verdict"], AXIS_COLOR)
            parts.append(f'<line class="change-point" x1="{x:.1f}" x2="{x:.1f}" y1="{top}" '
                         f'y2="{height - bottom}" stroke="{color}" stroke-dasharray="5 4"/>')  # fmt: skip
            parts.append(_text(x + 3, top + 10, f"{cp['change'] * 100:+.1f}%", size=11, fill=color))
    path = " ".join(f"{'M' if i == 0 else 'L'}{sx(i):.1f},{sy(v):.1f}" for i, v in enumerate(levels))
    parts.append(f'<path d="{path}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5"/>')
    for i, point in enumerate(points):
        ring = point["run_id"] == baseline_run
        # A run with failed launches beside its ok ones: its dot is the ok ones' level, hollow.
        failed = int(point.get("failed_launches") or 0)
        why = f"; {point.get('status')} {failed} of {point.get('launches')} launches" if failed else ""
        parts.append(
            f'<circle class="level{" baseline" if ring else ""}{" failed-launches" if failed else ""}" '
            f'cx="{sx(i):.1f}" cy="{sy(levels[i]):.1f}" '
            f'r="{6 if ring else 3.5}" fill="{"white" if ring or failed else PALETTE[0]}" '
            f'stroke="{BAD_COLOR if not ring else "#111827"}" stroke-width="{2 if ring or failed else 0.5}">'
            f"<title>{escape(point['run_id'])}: {_fmt(levels[i])}{' (baseline)' if ring else ''}"
            f"{escape(why)}</title></circle>"
        )
    parts.append(_text(left, height - 10, points[0]["run_id"], size=10))
    parts.append(_text(width - right, height - 10, points[-1]["run_id"], anchor="end", size=10))
    parts.append(_watermark(width, height, simulated))
    parts.append("</svg>")
    return "".join(parts)


def regression_section(analysis: Mapping[str, Any]) -> str:
    """The HTML of the regression section (without its heading)."""
    baseline = analysis.get("baseline") or {}
    metric = analysis["objective"]["metric"]
    reference = f"baseline {baseline['name']}" if baseline else "each config's previous run"
    outcome = analysis.get("outcome") or ("regression" if analysis["regressed"] else "no regression")
    statistic = analysis.get("statistic") or "median of the run's samples"
    intro = (
        f"<p>Outcome: <b>{escape(outcome if outcome == 'no regression' else outcome.upper())}</b>. "
        f"Reference: {escape(reference)}; "
        f"minimum effect {analysis['settings']['min_effect'] * 100:g}%, Mann-Whitney U, "
        "change points by E-divisive means. Each dot (and each value here): the "
        f"{escape(statistic)}; hollow dot: a run with failed launches beside its ok ones. "
        "Dashed lines: change points; ringed dot: the baseline run.</p>"
    )
    blocks = []
    for config in analysis["configs"]:
        color = VERDICT_COLOR.get(config["verdict"], AXIS_COLOR)
        rows = []
        for workload, verdicts in config["workloads"].items():
            for v in verdicts:
                change = "" if v["change"] is None else f"{v['change'] * 100:+.1f}%"
                values = "".join(
                    f"<td>{'' if v.get(key) is None else f'{float(v[key]):.4g}'}</td>"  # as regression.md
                    for key in ("candidate_median", "reference_median")
                )
                why = " — ".join(x for x in (v.get("failure_class"), v.get("note")) if x)
                rows.append(
                    f"<tr><td>{escape(workload)}</td><td>{escape(v['metric'])}</td>"
                    f'<td style="color:{VERDICT_COLOR.get(v["verdict"], AXIS_COLOR)}">'
                    f"{escape(v['verdict'])}</td>{values}"
                    f"<td>{change}</td><td>{escape(why)}</td></tr>"
                )
        stack = "; ".join(
            f"{c['name']} {c['before']} → {c['after']}" for c in config.get("attribution") or []
        )
        blocks.append(
            f'<div class="regression-config" data-verdict="{escape(config["verdict"])}">'
            f'<h3><code>{escape(config["config_id"])}</code> <span style="color:{color}">'
            f"{escape(config['verdict'])}</span></h3>"
            f'<p class="flags">{escape(config["label"])}</p>'
            + _failed_launches(config)
            + history_chart(config, baseline.get("run_id"), metric=metric, simulated=analysis["simulated"])
            + "<table><thead><tr><th>workload</th><th>metric</th><th>verdict</th><th>this run (median)</th>"
            "<th>reference (median)</th><th>change</th><th>why</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            + (f"<p>Stack components changed: {escape(stack)}</p>" if stack else "")
            + "</div>"
        )
    return intro + "".join(blocks)


def _failed_launches(config: Mapping[str, Any]) -> str:
    """This run's failed launches of the config, each with its log (nothing when none)."""
    failed = config.get("failed_launches") or []
    if not failed:
        return ""
    items = "".join(
        f"<li>attempt {escape(str(f.get('attempt')))} on {escape(str(f.get('host')))}: "
        f"{escape(str(f.get('status')))}: {escape(str(f.get('message') or ''))}"
        + (f" (log <code>{escape(str(f['log_path']))}</code>)" if f.get("log_path") else "")
        + "</li>"
        for f in failed
    )
    return (
        f'<p class="failed-launches">Failed launches: {escape(str(config.get("failed") or ""))} '
        f"(never compared as values; the ok launches are)</p><ul>{items}</ul>"
    )
