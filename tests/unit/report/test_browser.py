"""The report in a real browser (Debian's chromium, headless): scripts run, charts render."""

from __future__ import annotations

import re
from pathlib import Path

from headless import console_errors, load, screenshot


def test_report_loads_without_console_errors_and_charts_render(rendered, tmp_path: Path) -> None:
    html_path, _, data = rendered
    page = load(html_path)
    assert console_errors(page.log) == [], page.log[-3000:]
    match = re.search(r"<body[^>]*>", page.dom)
    assert match is not None, page.dom[:2000]
    body = match.group(0)
    assert 'data-ready="1"' in body  # our script ran to its end
    assert "data-errors" not in body  # and window.onerror saw nothing
    assert 'data-charts="3"' in body  # every SVG chart is in the rendered DOM
    assert page.dom.count('<circle class="point"') == len(data.pareto)
    assert page.dom.count('<g class="bar"') == sum(r.objective is not None for r in data.rows)


def test_console_error_detection_works(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<html><body><script>console.error('boom'); undefinedFunction();</script></body></html>"
    )
    page = load(broken)
    errors = console_errors(page.log)
    assert any("undefinedFunction" in e for e in errors), page.log[-3000:]


def test_screenshot(rendered, tmp_path: Path) -> None:
    png = screenshot(rendered[0], tmp_path / "report.png")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1400, 2000)
    assert len(data) > 50_000  # a rendered page, not a blank one
