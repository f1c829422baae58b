from __future__ import annotations

import itertools
import re
import sqlite3
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml
from render_sample import RUN_ID, build_sample_db
from sample_results import FAILURES

from bwtune.report import SIMULATED_LABEL, load_report, render_html, render_markdown, svg


def _sections(html: str) -> list[str]:
    return re.findall(r"<section id=\"[a-z]+\">.*?</section>", html, flags=re.S)


def test_every_section_and_chart_is_labelled_simulated(rendered) -> None:
    html_path, md_path, _ = rendered
    html = html_path.read_text()
    sections = _sections(html)
    assert len(sections) == 7
    assert all(SIMULATED_LABEL in section for section in sections)
    assert html.count('class="simulated-mark"') == 2  # both charts
    assert SIMULATED_LABEL in html.split("</title>")[0]
    md = md_path.read_text()
    outside_code = re.sub(r"```.*?```", "", md, flags=re.S)
    headings = [line for line in outside_code.splitlines() if line.startswith("#")]
    assert len(headings) >= 7
    assert all(SIMULATED_LABEL in h for h in headings if h.startswith(("# ", "## ")))


def test_real_results_carry_no_simulated_label(tmp_path: Path) -> None:
    conn = build_sample_db(tmp_path / "r.db", simulated=False)
    data = load_report(conn, RUN_ID)
    assert SIMULATED_LABEL not in render_html(data)
    assert SIMULATED_LABEL not in render_markdown(data)


def test_html_is_self_contained(rendered) -> None:
    html = rendered[0].read_text()
    # Nothing is fetched: no external scripts, stylesheets, images or fonts.
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", html)
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "@import" not in html and "url(" not in html


def test_svg_charts_are_well_formed_xml(rendered) -> None:
    html = rendered[0].read_text()
    charts = re.findall(r"<svg .*?</svg>", html, flags=re.S)
    assert len(charts) == 2
    for chart in charts:
        ElementTree.fromstring(chart)


def test_bar_chart_has_one_bar_per_measured_result_and_error_bars(rendered) -> None:
    _, _, data = rendered
    html = rendered[0].read_text()
    match = re.search(r'<svg [^>]*class="chart bar-chart".*?</svg>', html, flags=re.S)
    assert match is not None
    chart = match.group(0)
    measured = [r for r in data.rows if r.objective is not None]
    assert chart.count('<g class="bar"') == len(measured) == 8  # 7 ok + the wrong-output one
    assert chart.count('class="error-bar"') == sum(r.ci95 is not None for r in measured)
    assert chart.count('data-kind="best"') == 1
    assert 'data-kind="wrong-output"' in chart


def test_config_table_and_winner(rendered) -> None:
    _, md_path, data = rendered
    best = data.best
    assert best is not None and best.status == "ok"
    assert best.objective == max(r.objective for r in data.rows if r.status == "ok" and r.objective)
    # wrong-output is faster than the winner but ranks below every ok config.
    wrong = next(r for r in data.rows if r.status == "wrong-output")
    assert wrong.objective > best.objective
    assert data.rows.index(wrong) > max(i for i, r in enumerate(data.rows) if r.status == "ok")
    md = md_path.read_text()
    assert f"| 1 | `{best.id}` ★ | {best.host} | ok |" in md
    low, high = best.ci95
    assert f"{low:,.1f} \u2013 {high:,.1f}" in md
    snippet = md.split("```yaml\n")[1].split("```")[0]
    assert yaml.safe_load(snippet)["server_flags"]["moe-runner-backend"] == "flashinfer_trtllm"
    command = md.split("```sh\n")[1].split("```")[0]
    assert command.startswith("python -m sglang.launch_server")
    assert "--enable-dp-attention" in command


def test_failures_grouped_by_class_with_log_tail(rendered) -> None:
    html_path, md_path, data = rendered
    assert sorted(data.failures) == sorted(FAILURES)
    html, md = html_path.read_text(), md_path.read_text()
    for klass, message in FAILURES.items():
        assert f"### {klass} (1)" in md
        assert message in md
    assert html.count('<pre class="log">') == len(FAILURES)
    assert "Traceback (most recent call last):" in html


def test_pareto_frontier_per_workload(rendered) -> None:
    _, _, data = rendered
    for workload in ("chat-1k", "long-8k"):
        points = [p for p in data.pareto if p.workload == workload]
        frontier = [p for p in points if p.on_frontier]
        assert len(points) == 7 and 1 < len(frontier) < len(points)
        for p in points:
            dominated = any(
                q.decode_rate >= p.decode_rate and q.throughput >= p.throughput and q != p for q in points
            )
            assert p.on_frontier is not dominated
    # The highest-throughput point is always on the frontier.
    top = max((p for p in data.pareto if p.workload == "chat-1k"), key=lambda p: p.throughput)
    assert top.on_frontier


def test_stack_fingerprint_and_gpu_facts_shown(rendered) -> None:
    html = rendered[0].read_text()
    assert "sha256:5f1c0a9e3b7d" in html and "NVIDIA RTX PRO 6000 Blackwell" in html
    assert "2.9.1+cu130" in html


def test_user_text_is_escaped(tmp_path: Path) -> None:
    conn: sqlite3.Connection = build_sample_db(tmp_path / "r.db")
    data = load_report(conn, RUN_ID)
    row = data.rows[-1]
    row.result["failure"]["message"] = "<script>alert(1)</script>"
    html = render_html(data)
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_run_without_ok_results_has_no_winner(tmp_path: Path) -> None:
    from sample_results import sample_results

    from bwtune import results_db

    conn = results_db.connect(tmp_path / "r.db")
    results_db.import_results(conn, [r for r in sample_results() if r["status"] != "ok"])
    data = load_report(conn, "r20261130-demo")
    assert data.best is None and data.launch_command is None
    assert "no winner" in render_html(data) and "no winner" in render_markdown(data)


@pytest.mark.parametrize(("low", "high"), [(0, 1789), (12.3, 61.7), (0, 0.37), (5, 5)])
def test_nice_ticks_cover_the_range(low: float, high: float) -> None:
    ticks = svg.nice_ticks(low, high)
    assert ticks[0] <= low and ticks[-1] >= high and 3 <= len(ticks) <= 8
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1
