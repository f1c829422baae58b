"""Inline SVG charts drawn by hand: no scripts, no fonts or files from the network."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from bwtune.report.model import ParetoPoint

PALETTE = ("#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2")
BEST_COLOR, OK_COLOR, BAD_COLOR, AXIS_COLOR = "#16a34a", "#60a5fa", "#9ca3af", "#475569"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 2.5 or 5 times a power of ten apart)."""
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 10))
    return ticks


def _fmt(value: float) -> str:
    if abs(value) >= 100 or value == int(value):
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 12, cls: str = "",
          weight: str = "normal", fill: str = "#1f2937") -> str:  # fmt: skip
    klass = f' class="{cls}"' if cls else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" font-weight="{weight}" '
        f'fill="{fill}"{klass}>{escape(text)}</text>'
    )


def _watermark(width: float, height: float, simulated: bool) -> str:
    if not simulated:
        return ""
    return _text(width - 10, 18, "SIMULATED (bwtune stand-in)", anchor="end", size=12, weight="bold",
                 fill="#b91c1c", cls="simulated-mark")  # fmt: skip


@dataclass(frozen=True)
class Bar:
    label: str  # left of the bar: config id and host
    detail: str  # under the label: the values of the axes that vary
    value: float
    ci95: tuple[float, float] | None
    kind: str  # "best", "ok" or a failure class
    tooltip: str


def bar_chart(bars: Sequence[Bar], *, title: str, unit: str, simulated: bool) -> str:
    """Horizontal bars with 95% CI whiskers, one row per config."""
    row_h, top, left, right, bottom = 40, 34, 350, 170, 40
    width = 1100
    height = top + row_h * max(len(bars), 1) + bottom
    plot_w = width - left - right
    highs = [b.ci95[1] if b.ci95 else b.value for b in bars] or [1.0]
    ticks = nice_ticks(0.0, max(highs))
    scale = plot_w / ticks[-1]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart bar-chart" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}">',
        _text(0, 18, title, size=14, weight="bold"),
        _watermark(width, height, simulated),
    ]
    axis_y = top + row_h * len(bars)
    for tick in ticks:
        x = left + tick * scale
        parts.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y}" stroke="#e5e7eb"/>')
        parts.append(_text(x, axis_y + 16, _fmt(tick), anchor="middle", size=11, fill=AXIS_COLOR))
    parts.append(_text(left + plot_w / 2, axis_y + 34, unit, anchor="middle", size=12, fill=AXIS_COLOR))
    for index, bar in enumerate(bars):
        y = top + index * row_h
        color = {"best": BEST_COLOR, "ok": OK_COLOR}.get(bar.kind, BAD_COLOR)
        parts.append(f'<g class="bar" data-kind="{escape(bar.kind)}"><title>{escape(bar.tooltip)}</title>')
        parts.append(_text(left - 10, y + 16, bar.label, anchor="end", size=12, weight="bold"
                           if bar.kind == "best" else "normal"))  # fmt: skip
        # Already short (report.model.short_label keeps the values that differ): never cut here.
        parts.append(_text(left - 10, y + 30, bar.detail, anchor="end", size=10, fill="#6b7280"))
        w = max(bar.value * scale, 1.0)
        hatch = ' stroke="#6b7280" stroke-dasharray="4 3"' if bar.kind not in ("best", "ok") else ""
        parts.append(
            f'<rect x="{left}" y="{y + 6}" width="{w:.1f}" height="{row_h - 14}" rx="3" '
            f'fill="{color}"{hatch}/>'
        )
        end = bar.value
        if bar.ci95:
            x1, x2 = left + bar.ci95[0] * scale, left + bar.ci95[1] * scale
            mid = y + row_h / 2 - 1
            parts.append(
                f'<g class="error-bar" stroke="#111827" stroke-width="1.5">'
                f'<line x1="{x1:.1f}" y1="{mid:.1f}" x2="{x2:.1f}" y2="{mid:.1f}"/>'
                f'<line x1="{x1:.1f}" y1="{mid - 7:.1f}" x2="{x1:.1f}" y2="{mid + 7:.1f}"/>'
                f'<line x1="{x2:.1f}" y1="{mid - 7:.1f}" x2="{x2:.1f}" y2="{mid + 7:.1f}"/></g>'
            )
            end = max(end, bar.ci95[1])
        suffix = "" if bar.kind in ("best", "ok") else f"  {bar.kind}"
        parts.append(_text(left + end * scale + 8, y + 22, _fmt(bar.value) + suffix, size=12,
                           fill="#b91c1c" if suffix else "#111827"))  # fmt: skip
        parts.append("</g>")
    parts.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{axis_y}" stroke="{AXIS_COLOR}"/>')
    parts.append("</svg>")
    return "".join(parts)


def pareto_chart(points: Sequence[ParetoPoint], *, simulated: bool) -> str:
    """Throughput against per-request decode rate, one colour per workload, frontiers joined."""
    width, height = 1100, 520
    left, right, top, bottom = 80, 220, 34, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [p.decode_rate for p in points] or [0.0, 1.0]
    ys = [p.throughput for p in points] or [0.0, 1.0]
    x_ticks = nice_ticks(min(xs) * 0.9, max(xs) * 1.05)
    y_ticks = nice_ticks(0.0, max(ys) * 1.05)

    def sx(v: float) -> float:
        return left + (v - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]) * plot_w

    def sy(v: float) -> float:
        return top + plot_h - (v - y_ticks[0]) / (y_ticks[-1] - y_ticks[0]) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart pareto-chart" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="Throughput vs per-request decode rate">',
        _text(
            0,
            18,
            "Output throughput vs per-request decode rate (up and right is better)",
            size=14,
            weight="bold",
        ),
        _watermark(width, height, simulated),
    ]
    for tick in x_ticks:
        x = sx(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#e5e7eb"/>')
        parts.append(_text(x, top + plot_h + 16, _fmt(tick), anchor="middle", size=11, fill=AXIS_COLOR))
    for tick in y_ticks:
        y = sy(tick)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        parts.append(_text(left - 8, y + 4, _fmt(tick), anchor="end", size=11, fill=AXIS_COLOR))
    parts.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="{AXIS_COLOR}"/>'
    )
    parts.append(_text(left + plot_w / 2, height - 12, "per-request decode rate (output tok/s per request)",
                       anchor="middle", size=12, fill=AXIS_COLOR))  # fmt: skip
    parts.append(
        f'<text x="18" y="{top + plot_h / 2:.1f}" transform="rotate(-90 18 {top + plot_h / 2:.1f})" '
        f'text-anchor="middle" font-size="12" fill="{AXIS_COLOR}">output throughput (tok/s)</text>'
    )
    workloads = sorted({p.workload for p in points})
    lines_drawn = 0
    for index, workload in enumerate(workloads):
        color = PALETTE[index % len(PALETTE)]
        mine = [p for p in points if p.workload == workload]
        frontier = sorted((p for p in mine if p.on_frontier), key=lambda p: p.decode_rate)
        if len(frontier) > 1:
            path = " ".join(f"{sx(p.decode_rate):.1f},{sy(p.throughput):.1f}" for p in frontier)
            parts.append(
                f'<polyline class="frontier" points="{path}" fill="none" stroke="{color}" '
                f'stroke-width="2" stroke-dasharray="6 4"/>'
            )
            lines_drawn += 1
        for p in mine:
            tip = (f"{p.id} @ {p.host} [{p.workload}] {p.label}\nthroughput {_fmt(p.throughput)} tok/s, "
                   f"decode {_fmt(p.decode_rate)} tok/s/request")  # fmt: skip
            radius, stroke = (7, "#111827") if p.on_frontier else (5, "white")
            parts.append(
                f'<circle class="point" cx="{sx(p.decode_rate):.1f}" cy="{sy(p.throughput):.1f}" '
                f'r="{radius}" '
                f'fill="{color}" stroke="{stroke}" stroke-width="1.5"><title>{escape(tip)}</title></circle>'
            )
        ly = top + 10 + index * 24
        lx = left + plot_w + 24
        parts.append(f'<circle cx="{lx}" cy="{ly}" r="6" fill="{color}"/>')
        parts.append(_text(lx + 12, ly + 4, workload, size=12))
    ly = top + 10 + len(workloads) * 24
    lx = left + plot_w + 24
    # The legend shows only what is drawn: the dashed line only when a frontier has one.
    if lines_drawn:
        parts.append(
            f'<line class="legend-frontier" x1="{lx - 6}" y1="{ly}" x2="{lx + 6}" y2="{ly}" '
            f'stroke="{AXIS_COLOR}" stroke-dasharray="4 3" stroke-width="2"/>'
        )
    else:
        parts.append(f'<circle cx="{lx}" cy="{ly}" r="6" fill="white" stroke="#111827" stroke-width="1.5"/>')
    parts.append(_text(lx + 12, ly + 4, "Pareto frontier", size=12))
    parts.append(_text(lx + 12, ly + 20, "(outlined points)", size=11, fill="#6b7280"))
    parts.append("</svg>")
    return "".join(parts)
