"""analysis.speculative: per load, speculative decoding off against its best setting."""

from __future__ import annotations

from typing import Any

import pytest

from bwtune.analysis import speculative as spec_view

OFF: dict[str, Any] = {"tp-size": 8, "moe-runner-backend": "flashinfer_cutlass"}


def on(steps: int, drafts: int, topk: int = 1) -> dict[str, Any]:
    return {**OFF, "speculative-algorithm": "EAGLE", "speculative-num-steps": steps,
            "speculative-eagle-topk": topk, "speculative-num-draft-tokens": drafts}  # fmt: skip


def result(cid: str, flags: dict[str, Any], per_load: dict[str, tuple[float, float | None]], **kw: Any):
    metrics = {
        w: {
            "values": {"output_throughput": v, "accept_length": a},
            "workload": {"name": w, "concurrency": int(w[1:])},
        }
        for w, (v, a) in per_load.items()
    }
    return {"id": cid, "host": "h", "status": kw.get("status", "ok"), "flags": flags, "metrics": metrics}


def output(results: list[dict[str, Any]], target: str, goal: str = "max") -> dict[str, Any]:
    objective = {"workload": target, "metric": "output_throughput", "goal": goal}
    return {"results": results, "summary": {"objective": objective, "simulated": True}}


RESULTS = [
    result("c0", OFF, {"c8": (380.0, None), "c64": (1500.0, None)}),
    result("c3", on(3, 4), {"c8": (660.0, 2.8), "c64": (900.0, 2.1)}),
    result("c1", on(1, 2), {"c8": (540.0, 1.9), "c64": (1400.0, 1.6)}),
    result("cx", on(2, 3), {"c8": (9999.0, 3.0), "c64": (9999.0, 3.0)}, status="failed"),
]


def test_setting_labels():
    assert spec_view.spec_setting(OFF) == "off"
    assert spec_view.spec_setting(on(3, 4)) == "on (EAGLE steps=3, topk=1, draft=4)"
    assert (
        spec_view.spec_setting({"speculative-algorithm": "NEXTN"})
        == "on (NEXTN steps=auto, topk=auto, draft=auto)"
    )


def test_rows_per_load_say_where_mtp_wins_and_loses():
    rows = spec_view.speculative_rows(output(RESULTS, "c64"))
    assert [r["workload"] for r in rows] == ["c64", "c8"]  # the target first
    c64, c8 = rows
    assert c64["target"] and c64["winner"] == "off" and c64["load"] == "concurrency 64"
    assert c64["on"]["setting"] == "on (EAGLE steps=1, topk=1, draft=2)" and c64["on"]["accept_length"] == 1.6
    assert c64["gain"] == pytest.approx(1400 / 1500 - 1)
    assert c8["winner"] == "on (EAGLE steps=3, topk=1, draft=4)" and c8["gain"] == pytest.approx(
        660 / 380 - 1
    )
    assert [s["id"] for s in c8["settings"]] == ["c3", "c1", "c0"]  # the failed config is no point
    assert spec_view.verdict_text(c64) == "off wins: the best MTP setting loses 7%"
    assert spec_view.verdict_text(c8) == "on (EAGLE steps=3, topk=1, draft=4) wins by 74%"
    verdict = spec_view.conclusion(rows)
    assert verdict is not None
    assert verdict["winner"] == "off" and verdict["wins"] == ["concurrency 8"]
    assert verdict["loses"] == ["concurrency 64"]


def test_the_winner_follows_the_target():
    verdict = spec_view.conclusion(spec_view.speculative_rows(output(RESULTS, "c8")))
    assert verdict is not None and verdict["winner"] == "on (EAGLE steps=3, topk=1, draft=4)"


def test_goal_min_prefers_the_lower_value():
    rows = spec_view.speculative_rows(output(RESULTS, "c8", goal="min"))
    c8 = next(r for r in rows if r["workload"] == "c8")
    assert c8["winner"] == "off" and c8["gain"] == pytest.approx(380 / 540 - 1)


def test_only_off_measured_has_no_gain():
    rows = spec_view.speculative_rows(output(RESULTS[:1], "c8"))
    assert rows and all(r["gain"] is None and r["winner"] == "off" for r in rows)
    assert spec_view.verdict_text(rows[0]) == "only off measured"


def test_capacity_workload_compares_by_capacity_and_reads_the_load():
    block = {"values": {"capacity": 12.0, "output_throughput": 1.0}, "capacity": {"value": 12.0},
             "workload": {"name": "cap", "capacity": {"slo": {}}}}  # fmt: skip
    better = {**block, "values": {"capacity": 15.0, "output_throughput": 0.5, "accept_length": 2.5}}
    results = [
        {"id": "a", "host": "h", "status": "ok", "flags": OFF, "metrics": {"cap": block}},
        {"id": "b", "host": "h", "status": "ok", "flags": on(3, 4), "metrics": {"cap": better}},
    ]
    (row,) = spec_view.speculative_rows({"results": results, "summary": {"objective": {"workload": "other"}}})
    assert (
        row["metric"] == "capacity" and row["load"] == "capacity search" and row["winner"].startswith("on (")
    )


def test_load_text():
    assert spec_view.load_text({"request_rate": 4, "concurrency": 16}) == "4 requests/s, concurrency 16"
    assert spec_view.load_text({"request_rate": 2.5}) == "2.5 requests/s"
    assert spec_view.load_text(None) == "unknown load"


def test_read_link(tmp_path):
    assert spec_view.read_link(tmp_path) is None
    (tmp_path / spec_view.LINK_FILE).write_text("{not json")
    assert spec_view.read_link(tmp_path) is None
    (tmp_path / spec_view.LINK_FILE).write_text('{"base_run": "r1"}')
    assert spec_view.read_link(tmp_path) == {"base_run": "r1"}
