"""A config launched twice on one host and stack (adaptive's finals) shows in every report
format the value the ranking used, the mean of its launches, with each launch reachable;
a config measured once is shown as before."""

from __future__ import annotations

import json
import re
import sqlite3
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import results_db
from bwtune.cli import main
from bwtune.report import write_report

RUN_ID = "r20261201-finals"
OBJECTIVE = {"workload": "chat", "metric": "output_throughput", "goal": "max"}


def _line(config_id: str, value: float, minute: int, spread: float = 10.0) -> dict[str, Any]:
    reps = [value - spread, value, value + spread]
    half = 4.303 * spread / 3**0.5  # t(0.975, 2) * sd / sqrt(3): the three repetitions' 95% CI
    return contract.make_line(
        run_id=RUN_ID,
        host="gpu-a",
        config_id=config_id,
        point={"cuda-graph-max-bs": config_id},
        flags={"tp-size": 8, "cuda-graph-max-bs": config_id},
        status="ok",
        simulated=True,
        stack_fingerprint="sha256:stack",
        gpu="sm120",
        finished_at=f"2026-12-01T10:{minute:02d}:00+00:00",
        metrics={
            "chat": {
                "n": 3,
                "values": {"output_throughput": value},
                "ci95": {"output_throughput": [value - half, value + half]},
                "cv": {},
                "repetitions": [{"output_throughput": v} for v in reps],
            }
        },
    )


# (config id, launch values in the order the node measured them). Ranked by the last launch,
# "twice-low" (1,300) would win over "once" (1,200); by the mean of its launches (1,150) it
# does not. In "twice-wins" the re-measured config wins with its mean (1,275).
SCENARIOS = {
    "mean-loses": [("twice", [1000.0, 1300.0]), ("once", [1200.0]), ("slow", [900.0])],
    "mean-wins": [("twice", [1300.0, 1250.0]), ("once", [1200.0]), ("slow", [900.0])],
}


def _db(tmp_path: Path, scenario: str) -> tuple[sqlite3.Connection, list[dict[str, Any]]]:
    # The node's order: every config's first launch, then the finals' re-measure.
    launches = [(config_id, value) for config_id, values in SCENARIOS[scenario] for value in values[:1]]
    launches += [(config_id, value) for config_id, values in SCENARIOS[scenario] for value in values[1:]]
    lines = [_line(config_id, value, minute) for minute, (config_id, value) in enumerate(launches)]
    conn = results_db.connect(tmp_path / "results.db")
    results_db.import_results(conn, lines)
    results_db.record_run(conn, RUN_ID, objective=OBJECTIVE)
    return conn, lines


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_remeasured_config_shows_its_mean_and_the_same_winner_in_every_format(
    tmp_path: Path, scenario: str
) -> None:
    conn, lines = _db(tmp_path, scenario)
    values = dict(SCENARIOS[scenario])["twice"]
    pooled = contract.pooled_launches(lines, OBJECTIVE)[("gpu-a", "twice", "sha256:stack")][0]
    assert pooled == pytest.approx(sum(values) / 2) and pooled != values[-1]
    winner = str(contract.pick_best(lines, OBJECTIVE)["config_id"])  # type: ignore[index]
    assert winner == ("once" if scenario == "mean-loses" else "twice")

    # --json (bwtune sweep --json, bwtune export --json): the value ranked, each launch.
    output = results_db.build_run_output(conn, RUN_ID)
    by_id = {r["id"]: r for r in output["results"]}
    twice = by_id["twice"]
    assert output["best"]["id"] == winner
    assert twice["objective"] == pooled
    assert [(n["attempt"], n["value"], n["repetitions"]) for n in twice["objective_launches"]] == [
        (1, values[0], 3),
        (2, values[1], 3),
    ]
    # Its CI is over the repetitions of both launches (centred on the mean: three each).
    samples = [v + d for v in values for d in (-10.0, 0.0, 10.0)]
    assert twice["objective_ci95"] == pytest.approx(list(contract.mean_ci95(samples)[1] or ()))
    assert sum(twice["objective_ci95"]) / 2 == pytest.approx(pooled)
    ranked = sorted(output["results"], key=lambda r: -r["objective"])
    assert ranked[0]["id"] == winner  # the table's order agrees with the winner

    html_path, md_path = tmp_path / "report.html", tmp_path / "report.md"
    data = write_report(conn, RUN_ID, html_path=html_path, md_path=md_path)
    conn.close()
    assert data.best is not None and data.best.id == winner and data.rows[0].id == winner
    row = next(r for r in data.rows if r.id == "twice")
    assert row.objective == pooled and row.repetitions == 6
    each = f"attempt 1: {values[0]:,.1f}; attempt 2: {values[1]:,.1f}"

    md = md_path.read_text()
    table = [line for line in md.splitlines() if re.match(r"\| \d+ \| `", line)]
    assert table[0].startswith(f"| 1 | `{winner}` ★ |")
    twice_row = next(line for line in table if "`twice`" in line)
    assert f"| {pooled:,.1f} (mean of 2 launches) |" in twice_row
    assert f"- `twice` @ gpu-a: mean of 2 launches: {each}" in md
    assert re.search(rf"`{winner}` on `gpu-a`: output_throughput \*\*", md)

    html = html_path.read_text()
    best_row = re.search(r'<tr class="best">.*?</tr>', html)
    assert best_row is not None and f"<code>{winner}</code>" in best_row.group(0)
    cell = re.search(rf'data-sort="{pooled:.6f}">{pooled:,.1f}<span class="launches" title="([^"]*)">'
                     r"mean of 2 launches</span>", html)  # fmt: skip
    assert cell is not None and unescape(cell.group(1)) == f"mean of 2 launches: {each}"
    assert f"<b>{winner}</b> on <b>gpu-a</b>" in html


def test_a_config_measured_once_is_shown_as_its_line(tmp_path: Path) -> None:
    conn, lines = _db(tmp_path, "mean-loses")
    output = results_db.build_run_output(conn, RUN_ID)
    data = write_report(conn, RUN_ID, md_path=tmp_path / "report.md", html_path=tmp_path / "report.html")
    conn.close()
    line = next(line for line in lines if line["config_id"] == "once")
    once = next(r for r in output["results"] if r["id"] == "once")
    assert once["objective"] == contract.metric_value(line, OBJECTIVE) == 1200.0
    assert once["objective_ci95"] == list(contract.metric_ci95(line, OBJECTIVE) or ())
    assert once["objective_launches"] is None
    row = next(r for r in data.rows if r.id == "once")
    assert (row.objective, row.repetitions, row.launches) == (1200.0, 3, ())
    md_row = next(
        x for x in (tmp_path / "report.md").read_text().splitlines() if x.startswith("| 1 | `once`")
    )
    assert "| 1,200.0 |" in md_row and "mean of" not in md_row
    html_row = re.search(r"<tr[^>]*><td[^>]*>\d+</td><td class=\"id\"><code>once</code>.*?</tr>",
                         (tmp_path / "report.html").read_text())  # fmt: skip
    assert html_row is not None and "launches" not in html_row.group(0)


def test_bwtune_report_and_export_json_name_the_mean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    conn, _lines = _db(tmp_path, "mean-wins")
    conn.close()
    db = str(tmp_path / "results.db")
    assert main(["report", RUN_ID, "--db", db, "--md", str(tmp_path / "r.md")]) == 0
    assert "best: twice on gpu-a, output_throughput 1,275.0 (mean of 2 launches)" in capsys.readouterr().out
    assert main(["export", RUN_ID, "--db", db, "--json"]) == 0
    output = json.loads(capsys.readouterr().out)
    assert output["best"]["objective"] == 1275.0
    assert [n["value"] for n in output["best"]["objective_launches"]] == [1300.0, 1250.0]
