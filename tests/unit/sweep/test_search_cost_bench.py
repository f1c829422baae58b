"""benchmarks/search_cost.py keeps working: three landscapes, every strategy, the node's own code."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="module")
def search_cost():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import search_cost

        yield search_cost
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_three_landscapes_every_strategy(search_cost, capsys) -> None:  # type: ignore[no-untyped-def]
    result = search_cost.run(3, 0)
    by = {}
    for o in result["outcomes"]:
        by.setdefault(o["strategy"], []).append(o)
    assert set(by) == {search_cost.UNPRUNED, *search_cost.STRATEGIES}
    assert all(len(outcomes) == 4 for outcomes in by.values()), "the mission and 3 landscapes"
    plan = result["plan"]
    assert plan["launches"] == 36 and plan["pruned"] == 27
    # every config once, then up to six re-measures of a lead within the noise
    assert all(36 <= o["launches"] <= 36 + strategies.REMEASURES and o["full"] >= 30 for o in by["grid"])
    assert all(63 <= o["launches"] <= 63 + strategies.REMEASURES for o in by[search_cost.UNPRUNED])
    assert all(o["launches"] == 7 for o in by["one-axis"])
    for grid, adaptive in zip(by["grid"], by["adaptive"], strict=True):
        assert adaptive["launches"] < grid["launches"] and adaptive["gpu_hours"] < grid["gpu_hours"] / 2
    mission = next(o for o in by["adaptive"] if o["landscape"] == "mission")
    assert mission["found"], mission
    assert search_cost.main(["--landscapes", "1"]) == 0
    assert "| adaptive |" in capsys.readouterr().out


def test_warm_caches_cost_less_than_cold(search_cost) -> None:  # type: ignore[no-untyped-def]
    cold = search_cost.run(1, 0, ("grid",))["outcomes"]
    warm = search_cost.run(1, 0, ("grid",), warm_caches=True)["outcomes"]
    for c, w in zip(cold, warm, strict=True):
        assert w["gpu_hours"] < c["gpu_hours"] and w["chosen"] == c["chosen"]


def test_the_wide_matrix_is_planned_and_searched(search_cost) -> None:  # type: ignore[no-untyped-def]
    _matrix, plan = search_cost.wide_plan()
    summary = plan["summary"]
    assert summary["combinations"] == 5400 and summary["launches"] == 648
    rows = {r["strategy"]: r for r in search_cost.wide("tuning", count=1)}
    assert set(rows) == set(search_cost.WIDE_STRATEGIES)
    assert rows["grid"]["launches_max"] >= 648 and rows["grid"]["share"] == 1.0
    assert rows["adaptive"]["share"] < 0.5 and rows["adaptive"]["over_announced"] == 0
    assert all(r["launches_max"] <= r["announced"] for r in rows.values())
