"""`bwtune report` of a capacity run (issue 26): the capacity section and the throughput/
latency Pareto front, in report.html and report.md, labelled simulated where the run was."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree

from capacity_sample import OBJECTIVE, RUN_ID, capacity_results

from bwtune import results_db
from bwtune.cli import main
from bwtune.report import SIMULATED_LABEL, load_report, render_html, render_markdown
from bwtune.report.model import ReportData


def _data(tmp_path: Path, *, simulated: bool = True) -> ReportData:
    conn = results_db.connect(tmp_path / "r.db")
    results_db.import_results(conn, capacity_results(simulated=simulated))
    results_db.record_run(conn, RUN_ID, matrix={"objective": OBJECTIVE, "workloads": ["chat-1k", "capacity"]})
    data = load_report(conn, RUN_ID)
    conn.close()
    return data


def _section(html: str, ident: str) -> str:
    found = re.search(rf'<section id="{ident}">.*?</section>', html, flags=re.S)
    assert found, f"no section {ident}"
    return found.group(0)


def test_capacity_section_ranks_configs_and_says_zero_and_at_least(tmp_path: Path) -> None:
    data = _data(tmp_path)
    assert data.best is not None and data.best.objective == 64.0  # the objective is the capacity
    html = _section(render_html(data), "capacity")
    assert SIMULATED_LABEL in html
    rows = re.findall(r"<tr><td>capacity</td>.*?</tr>", html, flags=re.S)
    values = [float(v) for row in rows for v in re.findall(r'class="num" data-sort="([0-9.]+)"', row)]
    ok = [r for r in data.rows if r.status == "ok"]
    assert len(rows) == len(ok)  # every ok config, and not the wrong-output launch
    assert values == sorted(values, reverse=True)
    assert "at least 64 requests/s" in rows[0] and " ★" in rows[0]  # the winner, marked
    assert "0 requests/s" in rows[-1] and "the SLO failed at every rate tried" in rows[-1]
    assert "p99_ttft_ms &lt;= 2000" in rows[0] and "p99_tpot_ms &lt;= 50" in rows[0]
    assert "31 requests/s" not in html  # the wrong-output launch's capacity is never shown


def test_markdown_has_the_capacity_table_and_the_fronts(tmp_path: Path) -> None:
    data = _data(tmp_path)
    md = render_markdown(data)
    capacity = md.split("## Capacity under the latency SLO")[1].split("\n## ")[0]
    assert capacity.startswith(f" — **{SIMULATED_LABEL}**")
    assert capacity.count("| capacity | `") == sum(r.status == "ok" for r in data.rows)
    assert "at least 64 requests/s" in capacity
    front = md.split("## Throughput vs latency percentile (Pareto front)")[1].split("\n## ")[0]
    assert SIMULATED_LABEL in front.splitlines()[0]
    assert "### capacity: output_throughput vs p99_tpot_ms" in front
    assert "SLO p99_tpot_ms <= 50.0" in front  # the capacity SLO is the latency's limit


def test_latency_front_lists_front_configs_and_the_winner(tmp_path: Path) -> None:
    data = _data(tmp_path)
    html = _section(render_html(data), "latency")
    assert SIMULATED_LABEL in html
    for front in data.latency_fronts:
        on = {(p["host"], p["id"]) for p in front["points"] if p["on_front"]}
        block = html.split(f'data-workload="{front["workload"]}" data-latency="{front["latency_metric"]}"')[1]
        block = block.split("</table>")[0]
        listed = set(re.findall(r'<code>([^<]+)</code>(?: ★)?</td><td class="id">([^<]+)</td>', block))
        best = {(p["host"], p["id"]) for p in front["points"] if p["is_best"]}
        assert {(host, cid) for cid, host in listed} == on | best
        # No wrong-output or other failed result is a point of any front.
        failed = {(r.host, r.id) for r in data.rows if r.status != "ok"}
        assert not failed & {(p["host"], p["id"]) for p in front["points"]}


def test_real_capacity_run_is_not_labelled_simulated(tmp_path: Path) -> None:
    data = _data(tmp_path, simulated=False)
    html, md = render_html(data), render_markdown(data)
    assert 'id="capacity"' in html and "## Capacity under the latency SLO" in md
    assert SIMULATED_LABEL not in html and SIMULATED_LABEL not in md


def test_report_json_carries_capacity_and_fronts(tmp_path: Path, capsys) -> None:
    data = _data(tmp_path)
    argv = ["report", RUN_ID, "--db", str(tmp_path / "r.db"), "--html", str(tmp_path / "r.html"), "--json"]
    assert main(argv) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["simulated"] is True
    assert body["capacity"] == data.capacity and body["capacity"][0]["lower_bound"]
    assert body["pareto_fronts"] == data.latency_fronts and body["pareto_fronts"]


def test_latency_front_chart_draws_the_front_the_winner_and_the_slo(tmp_path: Path) -> None:
    data = _data(tmp_path)
    chart = re.search(r'<svg [^>]*class="chart latency-front-chart".*?</svg>', render_html(data), flags=re.S)
    assert chart is not None
    svg_text = chart.group(0)
    ElementTree.fromstring(svg_text)
    # The objective's workload at its first percentile: the capacity SLO's p99 TPOT.
    (drawn,) = [
        f for f in data.latency_fronts if (f["workload"], f["latency_metric"]) == ("capacity", "p99_tpot_ms")
    ]
    assert svg_text.count('<circle class="latency-point') == len(drawn["points"])
    assert svg_text.count('class="latency-point on-front"') == sum(p["on_front"] for p in drawn["points"])
    assert svg_text.count('class="best-mark"') == 1 and 'class="slo"' in svg_text
    assert "SLO p99_tpot_ms 50" in svg_text and 'class="simulated-mark"' in svg_text
    polyline = re.search(r'<polyline class="frontier" points="([^"]+)"', svg_text)
    assert polyline is not None and len(polyline.group(1).split()) == sum(
        p["on_front"] for p in drawn["points"]
    )
