from __future__ import annotations

import itertools
import json
import re
import shlex
import sqlite3
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml
from render_sample import RUN_ID, build_sample_db
from sample_results import FAILURES, LAUNCH_COMMAND

from bwtune.report import SIMULATED_LABEL, load_report, render_html, render_markdown, svg


def _sections(html: str) -> list[str]:
    return re.findall(r"<section id=\"[a-z]+\">.*?</section>", html, flags=re.S)


def test_every_section_and_chart_is_labelled_simulated(rendered) -> None:
    html_path, md_path, _ = rendered
    html = html_path.read_text()
    sections = _sections(html)
    assert len(sections) == 8  # the latency Pareto section: the sample has p99s
    assert all(SIMULATED_LABEL in section for section in sections)
    assert html.count('class="simulated-mark"') == 3  # every chart
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
    assert len(charts) == 3  # objective bars, decode-rate front, latency front
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
    assert command.startswith(shlex.join(LAUNCH_COMMAND))  # as the node recorded it
    assert "--enable-dp-attention" in command


def test_failures_grouped_by_class_with_log_tail(rendered) -> None:
    html_path, md_path, data = rendered
    launched = {k: v for k, v in FAILURES.items() if k not in ("pruned", "duplicate")}
    assert sorted(data.failures) == sorted(launched)
    assert sorted(data.not_launched) == ["duplicate", "pruned"]
    html, md = html_path.read_text(), md_path.read_text()
    for klass, message in launched.items():
        assert f"### {klass} (1)" in md
        assert message in md
    assert html.count('<pre class="log">') == len(launched)
    assert "Traceback (most recent call last):" in html


def test_failed_counts_exclude_planner_prunes_and_duplicates(rendered) -> None:
    html_path, md_path, data = rendered
    assert sum(data.summary["failed"].values()) == 6 and data.summary["not_launched"] == {
        "duplicate": 1,
        "pruned": 1,
    }
    md = md_path.read_text()
    assert "- ok: 7; failed: 6; not launched (pruned, duplicate): 2" in md
    assert "### Not launched" in md and FAILURES["pruned"] in md
    cards = re.findall(r'<div class="card"><b>(\d+)</b><span>([^<]+)</span>', html_path.read_text())
    assert ("6", "failed") in cards and ("2", "not launched (pruned, duplicate)") in cards


def test_plan_row_is_readable_not_a_dict_dump(tmp_path: Path) -> None:
    from bwtune import results_db

    conn = build_sample_db(tmp_path / "r.db")
    node_summary = {
        "run_id": RUN_ID, "strategy": "screen", "planned_configs": 15, "valid_configs": 13,
        "launches": 13, "resumed": 0, "saved_launches": 0, "screened_out": 2,
        "by_status": {"ok": 7, "oom": 1}, "objective": {"workload": "chat-1k", "metric": "x", "goal": "max"},
        "leftover_stopped": None, "results_path": "/var/lib/bwtune/r/results.jsonl", "simulated": True,
    }  # fmt: skip
    results_db.record_run(conn, RUN_ID, plan_summary=node_summary)
    data = load_report(conn, RUN_ID)
    assert data.plan_text == (
        "strategy screen, 15 configs planned, 13 valid, 13 launches, 0 resumed from an earlier attempt, "
        "0 launches saved by the strategy, 2 screened out"
    )
    html, md = render_html(data), render_markdown(data)
    for text in (html, md):
        assert "{'" not in text and "by_status" not in text
    assert f"- plan: {data.plan_text}" in md


def test_bar_labels_keep_what_differs_between_configs() -> None:
    from bwtune.report.model import short_label

    long_a = ["flashinfer_cutlass_with_a_very_long_backend_name_v1", "256", "on"]
    long_b = ["flashinfer_cutlass_with_a_very_long_backend_name_v2", "256", "on"]
    a, b = short_label(long_a), short_label(long_b)
    assert len(a) <= 58 and a != b and a.endswith("v1 · 256 · on")
    assert short_label(["triton", "128"]) == "triton · 128"


def test_bar_details_are_axis_values_named_once(rendered) -> None:
    html_path, _, data = rendered
    assert data.label_axes[:2] == ["moe-runner-backend", "cuda-graph-max-bs"]  # the matrix's order
    labels = [row.short_label for row in data.rows if row.objective is not None]
    assert len(set(labels)) == len({tuple(sorted(row.result["point"].items())) for row in data.rows
                                     if row.objective is not None})  # fmt: skip
    assert "Under each id: moe-runner-backend · cuda-graph-max-bs" in html_path.read_text()


def test_pareto_legend_shows_only_what_is_drawn(rendered) -> None:
    _, _, data = rendered
    drawn = svg.pareto_chart(data.pareto, simulated=False)
    assert 'class="frontier"' in drawn and 'class="legend-frontier"' in drawn
    # One point per workload: no frontier line is drawn, so the legend shows no line either.
    single = [next(p for p in data.pareto if p.workload == w) for w in ("chat-1k", "long-8k")]
    alone = svg.pareto_chart(single, simulated=False)
    assert 'class="frontier"' not in alone and 'class="legend-frontier"' not in alone


def test_configs_within_the_winners_noise_are_marked_tied(tmp_path: Path) -> None:
    from sample_results import sample_results

    from bwtune import results_db

    lines = sample_results()
    ok = sorted((r for r in lines if r["status"] == "ok" and r["host"] == "gpu-a"),
                key=lambda r: -r["metrics"]["chat-1k"]["values"]["output_throughput"])  # fmt: skip
    best_ci = ok[0]["metrics"]["chat-1k"]["ci95"]["output_throughput"]
    ok[1]["metrics"]["chat-1k"]["ci95"]["output_throughput"] = [best_ci[0] - 300.0, best_ci[0] + 1.0]
    conn = results_db.connect(tmp_path / "r.db")
    results_db.import_results(conn, lines)
    data = load_report(conn, "r20261130-demo")
    assert data.best is not None and data.best.id == ok[0]["config_id"]
    assert [(r.id, r.host) for r in data.ties] == [(ok[1]["config_id"], "gpu-a")]
    others = [r for r in data.rows if not r.is_best and r.id != ok[1]["config_id"]]
    assert not any(r.tied_with_best for r in others)
    assert f"`{ok[1]['config_id']}` ≈ tied" in render_markdown(data)
    assert "Tied with the winner" in render_html(data)


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


def test_the_winner_offers_its_recipe_export_and_the_command_exports_it(
    rendered, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    html_path, md_path, data = rendered
    best = data.best
    assert best is not None
    line = next(line for line in md_path.read_text().splitlines() if line.startswith("Share it as a recipe"))
    command = line.split("`")[1]
    assert command in html_path.read_text()
    argv = shlex.split(command)
    assert argv[:3] == ["bwtune", "recipe", "export"]
    from bwtune import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main([*argv[1:], "--db", str(md_path.parent / "results.db")]) == 0
    recipe = json.loads((tmp_path / f"recipe-{best.id}.json").read_text())
    assert recipe["measured"]["config_id"] == best.id and recipe["measured"]["run_id"] == RUN_ID
    assert recipe["measured"]["host"] == best.host
