"""`bwtune export` of a capacity run (issue 26): the JSON carries the capacity rows and the
throughput/latency Pareto fronts (simulated flagged), the CSV one column per front and the
capacity's lower bound."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from bwtune import results_db
from bwtune.analysis import pareto
from bwtune.cli import main
from tests.unit.db.capacity_sample import OBJECTIVE, RUN_ID, capacity_results


def _export(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, *, simulated: bool = True) -> str:
    db = tmp_path / "results.db"
    conn = results_db.connect(db)
    results_db.import_results(conn, capacity_results(simulated=simulated))
    results_db.record_run(conn, RUN_ID, matrix={"objective": OBJECTIVE})
    conn.close()
    assert main(["export", RUN_ID, "--db", str(db), "--format", fmt]) == 0
    return capsys.readouterr().out


def test_json_has_capacity_and_fronts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = json.loads(_export(tmp_path, capsys, "json"))
    ok = {(r["host"], r["id"]) for r in output["results"] if r["status"] == "ok"}
    rows = output["capacity"]
    assert {(r["host"], r["id"]) for r in rows} == ok
    assert all(r["simulated"] and r["workload"] == "capacity" for r in rows)
    assert [r["value"] for r in rows] == sorted((r["value"] for r in rows), reverse=True)
    assert rows[0]["lower_bound"] and rows[-1]["value"] == 0.0 and "every rate tried" in rows[-1]["reason"]
    fronts = output["pareto_fronts"]
    assert {(f["workload"], f["latency_metric"]) for f in fronts} == {
        (w, lat) for w in ("capacity", "chat-1k", "long-8k") for lat in pareto.LATENCIES
    }
    assert all(f["simulated"] for f in fronts)
    for front in fronts:
        assert {(p["host"], p["id"]) for p in front["points"]} <= ok
        assert any(p["on_front"] for p in front["points"])


def test_json_of_a_real_run_is_not_simulated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = json.loads(_export(tmp_path, capsys, "json", simulated=False))
    assert not any(r["simulated"] for r in output["capacity"])
    assert not any(f["simulated"] for f in output["pareto_fronts"])


def _rows(text: str) -> list[dict[str, Any]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_marks_front_membership_and_lower_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(_export(tmp_path, capsys, "csv"))
    fronts = pareto.fronts(_output(tmp_path))
    on = {(f["workload"], f["latency_metric"], p["host"], p["id"]): p["on_front"] for f in fronts
          for p in f["points"]}  # fmt: skip
    for row in rows:
        for latency in pareto.LATENCIES:
            cell = row[f"on_front_{latency}"]
            key = (row["workload"], latency, row["host"], row["config_id"])
            if row["status"] != "ok":
                assert cell == ""  # failed results (wrong-output too) are on no front
            else:
                assert cell == str(int(on[key]))
        capacity_row = row["status"] == "ok" and row["workload"] == "capacity"
        assert row["capacity_lower_bound"] in (("0", "1") if capacity_row else ("", "0", "1"))
    ok_capacity = [
        r for r in rows if r["workload"] == "capacity" and r["host"] == "gpu-a" and r["status"] == "ok"
    ]
    bounds = {row["config_id"]: row["capacity_lower_bound"] for row in ok_capacity}
    assert sorted(bounds.values()) == ["0"] * (len(bounds) - 1) + ["1"]
    assert {row["capacity_lower_bound"] for row in rows if row["workload"] != "capacity"} == {""}


def _output(tmp_path: Path) -> dict[str, Any]:
    conn = results_db.connect_readonly(tmp_path / "results.db")
    try:
        return results_db.build_run_output(conn, RUN_ID)
    finally:
        conn.close()
