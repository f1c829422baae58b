"""Inline SVG charts drawn by hand: no scripts, no fonts or files from the network."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

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


def tick_labels(ticks: list[float]) -> list[str]:
    """Axis labels with the decimals the step needs (`1,002.5`, never `1,002` next to
    `1,005`): evenly spaced ticks read evenly spaced."""
    steps = [b - a for a, b in itertools.pairwise(ticks) if b > a]
    step = min(steps) if steps else 1.0
    decimals = 0
    while decimals < 6 and abs(round(step, decimals) - step) > step * 1e-9:
        decimals += 1
    return [f"{tick:,.{decimals}f}" for tick in ticks]


def _fmt(value: float) -> str:
    if abs(value) >= 100 or value == int(value):
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 12, cls: str = "",
          weight: str = "normal", fill: str = "#1f2937", middle: bool = False) -> str:  # fmt: skip
    """`middle`: `y` is the text's vertical centre (an axis label on its grid line, at any
    font size), else its baseline."""
    klass = f' class="{cls}"' if cls else ""
    centre = ' dominant-baseline="central"' if middle else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" font-weight="{weight}" '
        f'fill="{fill}"{centre}{klass}>{escape(text)}</text>'
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
    for tick, text in zip(ticks, tick_labels(ticks), strict=True):
        x = left + tick * scale
        parts.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y}" stroke="#e5e7eb"/>')
        parts.append(_text(x, axis_y + 16, text, anchor="middle", size=11, fill=AXIS_COLOR))
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


def _frame(
    parts: list[str],
    box: tuple[float, float, float, float],
    x_ticks: list[float],
    y_ticks: list[float],
    scale: tuple[Callable[[float], float], Callable[[float], float]],
    labels: tuple[str, str],
    height: float,
) -> None:
    """A scatter chart's frame into `parts`: the grid at the ticks, their labels, the plot's
    box and the two axis titles (`labels`: x, y; plain text, escaped here). `box` is
    (left, top, plot width, plot height), `scale` the data-to-pixel maps of x and y."""
    left, top, plot_w, plot_h = box
    sx, sy = scale
    for tick, text in zip(x_ticks, tick_labels(x_ticks), strict=True):
        x = sx(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#e5e7eb"/>')
        parts.append(_text(x, top + plot_h + 16, text, anchor="middle", size=11, fill=AXIS_COLOR))
    for tick, text in zip(y_ticks, tick_labels(y_ticks), strict=True):
        y = sy(tick)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        parts.append(_text(left - 8, y, text, anchor="end", size=11, fill=AXIS_COLOR, middle=True))
    parts.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="{AXIS_COLOR}"/>'
    )
    parts.append(_text(left + plot_w / 2, height - 12, labels[0], anchor="middle", size=12, fill=AXIS_COLOR))
    parts.append(
        f'<text x="18" y="{top + plot_h / 2:.1f}" transform="rotate(-90 18 {top + plot_h / 2:.1f})" '
        f'text-anchor="middle" font-size="12" fill="{AXIS_COLOR}">{escape(labels[1])}</text>'
    )


def pareto_chart(points: Sequence[ParetoPoint], *, simulated: bool) -> str:
    """Output tok/s per GPU against per-user speed (a request's decode rate), one colour
    per workload, each workload's Pareto front (analysis.pareto.speed_fronts) joined."""
    width, height = 1100, 520
    left, right, top, bottom = 80, 220, 34, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [p.decode_rate for p in points] or [0.0, 1.0]
    ys = [p.per_gpu for p in points] or [0.0, 1.0]
    x_ticks = nice_ticks(min(xs) * 0.9, max(xs) * 1.05)
    y_ticks = nice_ticks(0.0, max(ys) * 1.05)

    def sx(v: float) -> float:
        return left + (v - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]) * plot_w

    def sy(v: float) -> float:
        return top + plot_h - (v - y_ticks[0]) / (y_ticks[-1] - y_ticks[0]) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart pareto-chart" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="Throughput per GPU vs per-user speed">',
        _text(
            0,
            18,
            "Output tok/s per GPU vs per-user speed (up and right is better)",
            size=14,
            weight="bold",
        ),
        _watermark(width, height, simulated),
    ]
    _frame(parts, (left, top, plot_w, plot_h), x_ticks, y_ticks, (sx, sy),
           ("per-user speed (output tok/s per request)", "output tok/s per GPU"), height)  # fmt: skip
    workloads = sorted({p.workload for p in points})
    lines_drawn = 0
    for index, workload in enumerate(workloads):
        color = PALETTE[index % len(PALETTE)]
        mine = [p for p in points if p.workload == workload]
        frontier = sorted((p for p in mine if p.on_frontier), key=lambda p: p.decode_rate)
        if len(frontier) > 1:
            path = " ".join(f"{sx(p.decode_rate):.1f},{sy(p.per_gpu):.1f}" for p in frontier)
            parts.append(
                f'<polyline class="frontier" points="{path}" fill="none" stroke="{color}" '
                f'stroke-width="2" stroke-dasharray="6 4"/>'
            )
            lines_drawn += 1
        for p in mine:
            tip = (f"{p.id} @ {p.host} [{p.workload}] {p.label}\n{_fmt(p.per_gpu)} tok/s per GPU "
                   f"({_fmt(p.throughput)} tok/s on {p.gpus} GPUs), "
                   f"{_fmt(p.decode_rate)} tok/s per user")  # fmt: skip
            radius, stroke = (7, "#111827") if p.on_frontier else (5, "white")
            parts.append(
                f'<circle class="point" cx="{sx(p.decode_rate):.1f}" cy="{sy(p.per_gpu):.1f}" '
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


def latency_front_chart(front: dict[str, Any], *, simulated: bool) -> str:
    """One throughput/latency front (analysis.pareto.fronts): latency across (left is
    better), throughput up, the front joined, the winner ringed, the SLO's threshold as a
    vertical line."""
    width, height = 1100, 460
    left, right, top, bottom = 80, 220, 34, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    points, slo = front["points"], front["slo"]
    latency, throughput = front["latency_metric"], front["throughput_metric"]
    xs = [p["latency"] for p in points] + ([slo] if slo is not None else [])
    ys = [p["throughput"] for p in points]
    x_ticks = nice_ticks(min(xs) * 0.9, max(xs) * 1.05)
    y_ticks = nice_ticks(0.0, max(ys) * 1.05)

    def sx(v: float) -> float:
        return left + (v - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]) * plot_w

    def sy(v: float) -> float:
        return top + plot_h - (v - y_ticks[0]) / (y_ticks[-1] - y_ticks[0]) * plot_h

    title = f"{front['workload']}: {throughput} vs {latency} (up and left is better)"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart latency-front-chart" viewBox="0 0 {width} '
        f'{height}" role="img" aria-label="{escape(title)}">',
        _text(0, 18, title, size=14, weight="bold"),
        _watermark(width, height, simulated),
    ]
    _frame(parts, (left, top, plot_w, plot_h), x_ticks, y_ticks, (sx, sy), (latency, throughput), height)
    if slo is not None:
        x = sx(slo)
        parts.append(
            f'<line class="slo" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#b91c1c" '
            f'stroke-width="1.5" stroke-dasharray="3 3"/>'
        )
        parts.append(_text(x + 4, top + 14, f"SLO {latency} {_fmt(slo)}", size=11, fill="#b91c1c"))
    on = sorted((p for p in points if p["on_front"]), key=lambda p: p["latency"])
    if len(on) > 1:
        path = " ".join(f"{sx(p['latency']):.1f},{sy(p['throughput']):.1f}" for p in on)
        parts.append(
            f'<polyline class="frontier" points="{path}" fill="none" stroke="{PALETTE[0]}" '
            f'stroke-width="2" stroke-dasharray="6 4"/>'
        )
    for p in points:
        tip = (f"{p['id']} @ {p['host']}{' (winner)' if p['is_best'] else ''}: {throughput} "
               f"{_fmt(p['throughput'])}, {latency} {_fmt(p['latency'])}"
               f"{'; on the front' if p['on_front'] else ''}")  # fmt: skip
        color = PALETTE[0] if p["on_front"] else BAD_COLOR
        cx, cy = sx(p["latency"]), sy(p["throughput"])
        klass = "latency-point on-front" if p["on_front"] else "latency-point"
        parts.append(
            f'<circle class="{klass}" cx="{cx:.1f}" cy="{cy:.1f}" r="6" '
            f'fill="{color}" stroke="white" stroke-width="1.5"><title>{escape(tip)}</title></circle>'
        )
        if p["is_best"]:
            parts.append(
                f'<circle class="best-mark" cx="{cx:.1f}" cy="{cy:.1f}" r="11" fill="none" '
                f'stroke="{BEST_COLOR}" stroke-width="2.5"/>'
            )
    lx, ly = left + plot_w + 24, top + 10
    legend = [
        f'<circle cx="{lx}" cy="{ly}" r="6" fill="{PALETTE[0]}"/>',
        _text(lx + 12, ly + 4, "on the front", size=12),
        f'<circle cx="{lx}" cy="{ly + 24}" r="6" fill="{BAD_COLOR}"/>',
        _text(lx + 12, ly + 28, "dominated", size=12),
        f'<circle cx="{lx}" cy="{ly + 48}" r="9" fill="none" stroke="{BEST_COLOR}" stroke-width="2.5"/>',
        _text(lx + 14, ly + 52, "the winner", size=12),
    ]
    parts.extend(legend)
    parts.append("</svg>")
    return "".join(parts)
