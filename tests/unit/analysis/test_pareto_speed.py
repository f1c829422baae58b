"""Per-user speed against throughput per GPU (issue 26): the GPUs a config's server uses,
the front of both maximised (hand-checked, then against brute force on random runs), and
the report's section, chart and markdown table, labelled SIMULATED on a stand-in run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bwtune import results_db, store
from bwtune.analysis import pareto
from bwtune.report import SIMULATED_LABEL, load_report, render_html, render_markdown
from bwtune.report.model import ReportData
from tests.unit.db.capacity_sample import OBJECTIVE, RUN_ID, capacity_results


@pytest.mark.parametrize(
    ("flags", "gpus"),
    [
        ({}, 1),
        ({"tp-size": 8}, 8),
        ({"--tp-size": "4", "pp-size": 2}, 8),
        ({"tp-size": 2, "dp-size": 4}, 8),
        ({"tp-size": 8, "dp-size": 8, "enable-dp-attention": True}, 8),  # DP ranks share the tp GPUs
        ({"tp-size": "auto", "pp-size": 0, "dp-size": True}, 1),  # not a positive whole number: 1
    ],
)
def test_gpus_of_a_config(flags: dict[str, Any], gpus: int) -> None:
    assert pareto.gpus_of(flags) == gpus


def _result(cid: str, tput: float, per_user: float | None, tp: int, *, status: str = "ok",
            workload: str = "w", tpot: float | None = None) -> dict[str, Any]:  # fmt: skip
    values: dict[str, Any] = {"output_throughput": tput}
    if per_user is not None:
        values["output_tok_s_per_request"] = per_user
    if tpot is not None:
        values["mean_tpot_ms"] = tpot
    return {"id": cid, "host": "h", "status": status, "flags": {"tp-size": tp},
            "metrics": {workload: {"values": values}}}  # fmt: skip


def _output(results: list[dict[str, Any]], best: str | None = None, simulated: bool = True) -> dict[str, Any]:
    return {"results": results, "summary": {"simulated": simulated},
            "best": {"id": best, "host": "h"} if best else None}  # fmt: skip


def _on(front: dict[str, Any]) -> set[str]:
    return {p["id"] for p in front["points"] if p["on_front"]}


def test_throughput_is_per_gpu_so_a_smaller_server_can_be_on_the_front() -> None:
    results = [
        _result("tp8", 800.0, 40.0, 8),  # 100 tok/s per GPU
        _result("tp2", 300.0, 40.0, 2),  # less in all, but 150 per GPU at the same speed: beats tp8
        _result("fast", 160.0, 90.0, 8),  # 20 per GPU, the fastest per user
        _result("slow", 100.0, 30.0, 8),  # beaten by tp2 on both
        _result("broken", 9000.0, 500.0, 1, status="failed"),  # never a point
    ]
    (front,) = pareto.speed_fronts(_output(results, best="tp8"))
    assert front["workload"] == "w" and front["simulated"]
    assert (front["per_user_metric"], front["per_gpu_metric"]) == (pareto.PER_USER, pareto.PER_GPU)
    assert [p["id"] for p in front["points"]] == ["tp2", "tp8", "fast", "slow"]  # highest per GPU first
    assert _on(front) == {"tp2", "fast"}
    tp8 = next(p for p in front["points"] if p["id"] == "tp8")
    assert tp8 == {"id": "tp8", "host": "h", "per_user": 40.0, "per_gpu": 100.0, "throughput": 800.0,
                   "gpus": 8, "on_front": False, "is_best": True}  # fmt: skip


def test_per_user_speed_falls_back_to_the_tpot_and_a_point_needs_both_numbers() -> None:
    results = [
        _result("tpot", 400.0, None, 4, tpot=20.0),  # 1000 / 20 ms = 50 tok/s per user
        _result("none", 400.0, None, 4),  # no speed: no point
        _result("other", 100.0, 10.0, 1, workload="v"),
    ]
    fronts = {f["workload"]: f for f in pareto.speed_fronts(_output(results))}
    assert set(fronts) == {"v", "w"}  # a front per workload
    (point,) = fronts["w"]["points"]
    assert (point["id"], point["per_user"], point["per_gpu"]) == ("tpot", 50.0, 100.0)


@given(
    st.lists(st.tuples(st.integers(1, 20), st.integers(1, 20), st.sampled_from([1, 2, 4, 8])), max_size=25)
)
def test_front_matches_brute_force(triples: list[tuple[int, int, int]]) -> None:
    results = [_result(f"c{i}", float(t * g), float(u), g) for i, (t, u, g) in enumerate(triples)]
    fronts = pareto.speed_fronts(_output(results))
    if not triples:
        assert fronts == []
        return
    (front,) = fronts
    pts = {p["id"]: (p["per_gpu"], p["per_user"]) for p in front["points"]}
    for cid, (g, u) in pts.items():
        beaten = any(g2 >= g and u2 >= u and (g2 > g or u2 > u) for g2, u2 in pts.values())
        assert (cid in _on(front)) == (not beaten), (cid, pts)


def _report_data(tmp_path: Path, simulated: bool = True, one_gpu: str | None = None) -> ReportData:
    """The stored sample capacity run (tests/unit/db), read back as `bwtune report` does;
    `one_gpu`: that config's server on 1 GPU (tp-size 1) where every other uses 8."""
    lines = capacity_results(simulated=simulated)
    for line in lines:
        if line["config_id"] == one_gpu:
            line["flags"]["tp-size"] = 1
    conn = results_db.connect(tmp_path / f"r-{simulated}-{one_gpu}.db")
    results_db.import_results(conn, lines)
    results_db.record_run(conn, RUN_ID, matrix={"objective": OBJECTIVE, "workloads": ["chat-1k", "capacity"]})
    data = load_report(conn, RUN_ID)
    assert data.speed_fronts == pareto.speed_fronts(store.build_run_output(conn, RUN_ID))
    conn.close()
    return data


def _dominated_on_total(points: list[Any], p: Any) -> bool:
    return any(
        q.decode_rate >= p.decode_rate
        and q.throughput >= p.throughput
        and (q.decode_rate > p.decode_rate or q.throughput > p.throughput)
        for q in points
    )


def test_the_reports_front_is_per_gpu(tmp_path: Path) -> None:
    """A config on one GPU, dominated on total output tok/s, is on the front per GPU; the
    report's points are the speed fronts' (every ok config of the run)."""
    data = _report_data(tmp_path)
    assert {f["workload"] for f in data.speed_fronts} == {"chat-1k", "long-8k"}  # the sample's
    # capacity blocks have no per-user speed: no point there
    ok = {(r.host, r.id) for r in data.rows if r.status == "ok"}
    for front in data.speed_fronts:
        assert {(p["host"], p["id"]) for p in front["points"]} <= ok  # not the wrong-output launch
    chat = [p for p in data.pareto if p.workload == "chat-1k" and p.host == "gpu-a"]
    loser = next(p for p in chat if _dominated_on_total(chat, p))
    assert loser.gpus == 8 and not loser.on_frontier
    data = _report_data(tmp_path, one_gpu=loser.id)
    moved = next(p for p in data.pareto if (p.workload, p.host, p.id) == ("chat-1k", "gpu-a", loser.id))
    assert moved.gpus == 1 and moved.per_gpu == moved.throughput == loser.throughput
    chat = [p for p in data.pareto if p.workload == "chat-1k" and p.host == "gpu-a"]
    assert _dominated_on_total(chat, moved) and moved.on_frontier  # 8x the others' tok/s per GPU
    fronts = {(f["workload"], p["host"], p["id"]): p for f in data.speed_fronts for p in f["points"]}
    for p in data.pareto:
        assert p.on_frontier == fronts[p.workload, p.host, p.id]["on_front"]
        assert p.per_gpu == pytest.approx(p.throughput / p.gpus)
    md = render_markdown(data)
    assert f"| chat-1k | `{moved.id}` | gpu-a | " in md
    row = next(line for line in md.splitlines() if line.startswith(f"| chat-1k | `{moved.id}` | gpu-a | "))
    assert row.endswith("| 1 | " + row.split(" | ")[-2] + " | frontier |")


def _section(html: str, ident: str) -> str:
    found = re.search(rf'<section id="{ident}">.*?</section>', html, flags=re.S)
    assert found, f"no section {ident}"
    return found.group(0)


def test_the_section_and_chart_say_per_gpu_labelled_simulated(tmp_path: Path) -> None:
    data = _report_data(tmp_path)
    html = _section(render_html(data), "pareto")
    assert "Per-user speed vs throughput per GPU (Pareto front)" in html and SIMULATED_LABEL in html
    chart = re.search(r"<svg.*?</svg>", html, flags=re.S)
    assert chart
    root = ElementTree.fromstring(chart.group(0))
    ns = "{http://www.w3.org/2000/svg}"
    assert len([c for c in root.iter(f"{ns}circle") if c.get("class") == "point"]) == len(data.pareto)
    texts = " ".join(t.text or "" for t in root.iter(f"{ns}text"))
    assert "output tok/s per GPU" in texts and "per-user speed (output tok/s per request)" in texts
    assert "tok/s on 8 GPUs" in chart.group(0)
    md = render_markdown(data).split("## Per-user speed vs throughput per GPU (Pareto front)")[1]
    assert SIMULATED_LABEL in md.splitlines()[0]
    assert "| tok/s per user | tok/s per GPU | GPUs | output tok/s | Pareto |" in md.split("\n## ")[0]
    real = render_html(_report_data(tmp_path, simulated=False))
    assert SIMULATED_LABEL not in _section(real, "pareto")
