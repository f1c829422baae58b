"""`bwtune export --format csv` carries each launch's cold start: one column per
results_contract.COLD_START_SECONDS field, empty where null and for lines without one."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import results_db
from bwtune.cli import main

RUN_ID = "r20261201-cold"
COLUMNS = [f"cold_start_{name}" for name in contract.COLD_START_SECONDS]
READY = {"process_to_listen_s": 0.5, "to_health_s": 181.0, "to_ready_s": 272.3, "to_first_token_s": 273.1}


def _line(config_id: str, status: str = "ok", **fields: Any) -> dict[str, Any]:
    metrics = {}
    if status == "ok":
        reps = [{"output_throughput": 1000.0 + n, "mean_tpot_ms": 20.0} for n in range(2)]
        metrics = {"chat": {"n": 2, "values": {"output_throughput": 1000.5}, "ci95": {}, "cv": {},
                            "repetitions": reps}}  # fmt: skip
    failure = None if status == "ok" else contract.make_failure(status, "CUDA out of memory")
    return contract.make_line(run_id=RUN_ID, host="gpu-a", config_id=config_id, status=status,
                              stack_fingerprint="sha256:stack", metrics=metrics, failure=failure,
                              **fields)  # fmt: skip


def _export_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[dict[str, Any]]):
    conn = results_db.connect(tmp_path / "results.db")
    results_db.import_results(conn, lines)
    conn.close()
    assert main(["export", RUN_ID, "--db", str(tmp_path / "results.db"), "--format", "csv"]) == 0
    text = capsys.readouterr().out
    assert next(csv.reader(io.StringIO(text)))[-len(COLUMNS) :] == COLUMNS
    return list(csv.DictReader(io.StringIO(text)))


def _cold(row: dict[str, str]) -> list[str]:
    return [row[column] for column in COLUMNS]


def test_export_csv_has_the_cold_start_of_each_launch(tmp_path: Path, capsys) -> None:
    older = _line("c-older")
    del older["cold_start"]  # a line of a node from before the breakdown: no key at all
    oom = {"process_to_listen_s": 0.5, "to_health_s": None, "to_ready_s": None, "to_first_token_s": None,
           "failed_after_s": 33.4, "reached": "listening"}  # fmt: skip
    lines = [
        _line("c-measured", cold_start={**READY, "failed_after_s": None, "reached": "first_token"}),
        older,
        _line("c-oom", status="oom", cold_start=oom),
    ]
    rows = _export_rows(tmp_path, capsys, lines)
    by_config: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_config.setdefault(row["config_id"], []).append(row)
    # Every row of a launch (each metric of each repetition) carries its cold start.
    assert len(by_config["c-measured"]) == 4
    assert {tuple(_cold(r)) for r in by_config["c-measured"]} == {("0.5", "181.0", "272.3", "273.1", "")}
    assert [_cold(r) for r in by_config["c-older"]] == [[""] * len(COLUMNS)] * 4
    (failed,) = by_config["c-oom"]  # no measurements: one row
    assert (failed["metric"], _cold(failed)) == ("", ["0.5", "", "", "", "33.4"])


def test_export_csv_gives_a_superseded_launch_its_own_cold_start(tmp_path: Path, capsys) -> None:
    cold = {**READY, "failed_after_s": None, "reached": "first_token"}
    first = _line("c-again", cold_start=cold)
    again = _line(
        "c-again", cold_start={**cold, "to_ready_s": 250.0}, finished_at="2026-12-01T11:00:00+00:00"
    )
    rows = _export_rows(tmp_path, capsys, [first, again])
    ready = {(row["attempt"], row["cold_start_to_ready_s"]) for row in rows}
    assert ready == {("1", "272.3"), ("2", "250.0")}
