"""The throughput/latency Pareto front: hand-checkable cases, then a property over random
runs (no front point is dominated by any result; every other result is dominated by a
front point), and the front of a stored run read through the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bwtune import results_db
from bwtune.analysis import pareto
from bwtune.analysis.pareto import Point, dominates, mark_front, points_of
from tests.unit.db.sample_results import sample_results


def _p(name: str, tput: float, lat: float) -> Point:
    return Point("w", name, "h", tput, lat)


def _front(points: list[Point]) -> set[str]:
    return {p.id for p in mark_front(points) if p.on_front}


def test_hand_checked_front() -> None:
    # a: fastest and slowest per token; c: lowest latency; b in between and not beaten;
    # d is beaten by b (more throughput, less latency); e by a (same latency, less throughput).
    points = [_p("a", 100, 50), _p("b", 80, 30), _p("c", 40, 10), _p("d", 70, 35), _p("e", 90, 50)]
    assert _front(points) == {"a", "b", "c"}


def test_equal_points_are_both_on_the_front_or_both_off() -> None:
    assert _front([_p("a", 100, 20), _p("b", 100, 20), _p("c", 50, 10)]) == {"a", "b", "c"}
    assert _front([_p("a", 100, 20), _p("b", 100, 20), _p("c", 100, 10)]) == {"c"}


def test_ties_on_one_axis_keep_only_the_better_other_axis() -> None:
    # Same throughput: the lower latency wins; same latency: the higher throughput wins.
    assert _front([_p("a", 100, 20), _p("b", 100, 25)]) == {"a"}
    assert _front([_p("a", 100, 20), _p("b", 90, 20)]) == {"a"}


def _result(rid: str, status: str, workloads: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"id": rid, "host": "h", "status": status,
            "metrics": {w: {"values": v} for w, v in workloads.items()}}  # fmt: skip


def test_failed_and_pruned_results_are_never_points() -> None:
    # The wrong-output launch would dominate everything: it must not hide the real front.
    results = [
        _result("ok1", "ok", {"w": {"output_throughput": 100.0, "p99_tpot_ms": 30.0}}),
        _result("ok2", "ok", {"w": {"output_throughput": 50.0, "p99_tpot_ms": 40.0}}),
        _result("bad", "wrong-output", {"w": {"output_throughput": 900.0, "p99_tpot_ms": 1.0}}),
        _result("pr", "pruned", {}),
    ]
    points = points_of(results, "p99_tpot_ms")["w"]
    assert {p.id for p in points} == {"ok1", "ok2"}
    assert {p.id for p in points if p.on_front} == {"ok1"}


def test_workloads_are_separate_fronts_and_missing_values_are_no_point() -> None:
    results = [
        _result("a", "ok", {"w1": {"output_throughput": 100.0, "p99_tpot_ms": 30.0},
                            "w2": {"output_throughput": 10.0, "p99_tpot_ms": 90.0}}),
        _result("b", "ok", {"w1": {"output_throughput": 50.0, "p99_tpot_ms": 40.0},
                            "w2": {"output_throughput": 20.0}}),
        _result("c", "ok", {"w2": {"output_throughput": 5.0, "p99_tpot_ms": float("nan")}}),
    ]  # fmt: skip
    found = points_of(results, "p99_tpot_ms")
    assert [p.id for p in found["w1"] if p.on_front] == ["a"]
    assert [p.id for p in found["w2"]] == ["a"]  # b lacks the latency, c's is not a number
    assert found["w2"][0].on_front


_VALUE = st.integers(min_value=0, max_value=6).map(float)  # few values: many ties and equal points


@given(st.lists(st.tuples(_VALUE, _VALUE), max_size=25))
def test_front_property(pairs: list[tuple[float, float]]) -> None:
    points = mark_front(_p(f"p{i}", t, lat) for i, (t, lat) in enumerate(pairs))
    front = [p for p in points if p.on_front]
    assert len(points) == len(pairs)
    for f in front:
        assert not any(dominates(q, f) for q in points)
    for p in points:
        if not p.on_front:
            assert any(dominates(f, p) for f in front)
    assert bool(front) == bool(pairs)


def test_fronts_of_a_stored_run(tmp_path: Path) -> None:
    conn = results_db.connect(tmp_path / "r.db")
    results_db.import_results(conn, sample_results("run1", simulated=True))
    fronts = pareto.run_fronts(conn, "run1")
    output = results_db.build_run_output(conn, "run1")
    conn.close()
    assert {(f["workload"], f["latency_metric"]) for f in fronts} == {
        (w, lat) for w in ("chat-1k", "long-8k") for lat in pareto.LATENCIES
    }
    ok = {(r["host"], r["id"]) for r in output["results"] if r["status"] == "ok"}
    best = (output["best"]["host"], output["best"]["id"])
    for front in fronts:
        assert front["simulated"] is True
        keys = {(p["host"], p["id"]) for p in front["points"]}
        assert keys == ok  # every ok config measured both workloads; no failed one is a point
        assert [p["is_best"] for p in front["points"]].count(True) == 1
        assert any(p["is_best"] and (p["host"], p["id"]) == best for p in front["points"])
        on = [p for p in front["points"] if p["on_front"]]
        assert on and len(on) < len(front["points"])  # the sample trades one for the other
