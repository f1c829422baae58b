"""The capacity search (issue 26): bracket, then bisect the request rate to the highest one
at which the SLO percentiles hold, driven here by fake measurement functions whose
capacity is known; and a capacity workload's schema, in the client and the matrix."""

from __future__ import annotations

import random
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import bench_workload
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.capacity_search import (
    MIN_ROUND_REQUESTS,
    CapacitySpec,
    CapacitySpecError,
    round_gaps,
    search,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError, parse
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import FlagTable

SLO = {"p99_ttft_ms": 2000, "p99_tpot_ms": 50}


def knee(capacity: float, failed: int = 0):
    """A fake server: p99 TTFT rises past 2000 ms just above `capacity` requests/s."""
    calls: list[float] = []

    def measure(rate: float) -> dict[str, Any]:
        calls.append(rate)
        ttft = 500.0 if rate <= capacity else 2000.0 + 1000.0 * (rate - capacity)
        return {"p99_ttft_ms": ttft, "p99_tpot_ms": 30.0, "failed": failed, "completed": 100}

    measure.calls = calls  # type: ignore[attr-defined]
    return measure


def spec(**kw: Any) -> CapacitySpec:
    return CapacitySpec.from_dict({"slo": SLO, **kw})


@pytest.mark.parametrize("capacity", [0.3, 0.55, 1.0, 1.7, 2.9, 3.9])
def test_the_search_converges_within_10_percent_in_at_most_6_rounds(capacity: float) -> None:
    # From a start rate within a factor of 4 of the capacity (docs/capacity.md).
    measure = knee(capacity)
    result = search(spec(start_rate=1.0), measure)
    assert len(result["rounds"]) <= 6
    assert result["lower_bound"] is False
    assert result["value"] <= capacity < result["first_failing"]
    assert result["value"] >= 0.9 * capacity, result["rounds"]
    assert result["last_passing"] == result["value"]
    assert [r["load"] for r in result["rounds"]] == measure.calls
    assert result["unit"] == "requests/s" and result["slo"] == {k: float(v) for k, v in SLO.items()}


def test_rounds_record_load_percentiles_and_verdict() -> None:
    result = search(spec(start_rate=1.0), knee(1.5))
    first, second = result["rounds"][:2]
    assert first == {
        "load": 1.0,
        "p99_ttft_ms": 500.0,
        "p99_tpot_ms": 30.0,
        "completed": 100,
        "request_throughput": None,
        "passed": True,
    }
    assert second["load"] == 2.0 and second["passed"] is False
    assert "p99_ttft_ms 2500.0 > 2000" in second["why"]


def test_an_slo_no_load_meets_gives_capacity_0_with_a_reason() -> None:
    measure = knee(0.0001)
    result = search(spec(start_rate=8.0, max_rounds=4), measure)
    assert measure.calls == [8.0, 4.0, 2.0, 1.0]
    assert result["value"] == 0.0 and result["last_passing"] is None and result["first_failing"] == 1.0
    assert result["lower_bound"] is False
    reason = "the SLO failed at every rate tried, down to 1 requests/s (p99_ttft_ms"
    assert result["reason"].startswith(reason)


def test_an_slo_met_at_every_load_tried_is_a_lower_bound() -> None:
    result = search(spec(start_rate=1.0, max_rounds=3), knee(1e9))
    assert [r["load"] for r in result["rounds"]] == [1.0, 2.0, 4.0]
    assert result["value"] == 4.0 and result["lower_bound"] is True and result["first_failing"] is None
    assert result["reason"] == "the SLO held at every rate tried: capacity at least 4 requests/s"


def test_max_rate_ends_the_search_early_as_a_lower_bound() -> None:
    result = search(spec(start_rate=1.0, max_rate=3.0), knee(1e9))
    assert [r["load"] for r in result["rounds"]] == [1.0, 2.0, 3.0]
    assert result["value"] == 3.0 and result["lower_bound"] is True


def test_a_round_with_failed_requests_fails() -> None:
    result = search(spec(start_rate=1.0, max_rounds=2), knee(1e9, failed=3))
    assert result["value"] == 0.0
    assert all(not r["passed"] and r["why"] == "3 request(s) failed" for r in result["rounds"])


def test_the_search_stops_when_the_bracket_is_within_rel_tol() -> None:
    result = search(spec(start_rate=1.0, max_rounds=20, rel_tol=0.05), knee(1.5))
    assert result["first_failing"] / result["value"] - 1 <= 0.05
    assert len(result["rounds"]) < 20


def test_round_gaps_hold_the_round_at_its_rate() -> None:
    gaps = round_gaps(10.0, MIN_ROUND_REQUESTS, random.Random(1))
    assert len(gaps) == MIN_ROUND_REQUESTS - 1
    assert sum(gaps) == pytest.approx((MIN_ROUND_REQUESTS - 1) / 10.0)
    assert len(set(gaps)) == len(gaps)  # exponential, not a fixed spacing
    assert gaps == round_gaps(10.0, MIN_ROUND_REQUESTS, random.Random(1))  # seeded


@pytest.mark.parametrize(
    ("raw", "key", "message"),
    [
        ([], (), "capacity must be a mapping"),
        ({"slo": SLO, "rounds": 3}, ("rounds",), "unknown capacity key 'rounds'"),
        ({}, ("slo",), "capacity.slo must be a mapping such as"),
        ({"slo": {"p95_ttft_ms": 9}}, ("slo", "p95_ttft_ms"), "unknown capacity.slo key 'p95_ttft_ms'"),
        ({"slo": {"p99_ttft_ms": 0}}, ("slo", "p99_ttft_ms"), "capacity.slo.p99_ttft_ms must be a number"),
        ({"slo": SLO, "start_rate": -1}, ("start_rate",), "capacity.start_rate must be a number > 0"),
        ({"slo": SLO, "start_rate": 4, "max_rate": 2}, ("max_rate",), "must be a number >= start_rate (4)"),
        ({"slo": SLO, "max_rounds": 0}, ("max_rounds",), "capacity.max_rounds must be an integer 1..20"),
        ({"slo": SLO, "rel_tol": 1}, ("rel_tol",), "capacity.rel_tol must be a number in (0, 1)"),
    ],
)
def test_bad_capacity_specs_name_their_key(raw: Any, key: tuple[str, ...], message: str) -> None:
    with pytest.raises(CapacitySpecError) as caught:
        CapacitySpec.from_dict(raw)
    assert caught.value.key == key and message in str(caught.value)


# ---------------------------------------------------------------- the workload and the matrix

NO_FLAGS = FlagTable("0.5.23", "test", {})
CAPACITY = {"name": "cap", "input_len": 1024, "output_len": 256, "capacity": {"slo": SLO, "start_rate": 2}}


def matrix_with(*workloads: dict[str, Any], objective: Any = None) -> dict[str, Any]:
    m: dict[str, Any] = {
        "model": {"path": "/models/m"},
        "hardware": {"gpu": "sm120"},
        "sglang": {"version": "0.5.23"},
        "axes": {},
        "workloads": list(workloads),
    }
    if objective is not None:
        m["objective"] = objective
    return m


def test_a_capacity_workload_is_an_open_loop_of_100_requests_a_round_and_round_trips() -> None:
    w = bench_workload.Workload.from_dict(CAPACITY)
    assert w.capacity is not None and w.capacity.slo_dict() == {"p99_ttft_ms": 2000.0, "p99_tpot_ms": 50.0}
    assert (w.num_prompts, w.concurrency, w.capacity.start_rate, w.capacity.max_rounds) == (100, None, 2.0, 6)
    assert bench_workload.Workload.from_dict(w.to_dict()) == w
    # request_rate, when given, is where the search starts
    w2 = bench_workload.Workload.from_dict({**CAPACITY, "request_rate": 5, "capacity": {"slo": SLO}})
    assert w2.capacity is not None and w2.capacity.start_rate == 5.0


def test_the_matrix_says_one_line_for_a_bad_capacity_workload() -> None:
    bad = {**CAPACITY, "capacity": {"slo": {"p99_ttft_ms": "2s"}}}
    with pytest.raises(MatrixError) as caught:
        parse(matrix_with(bad), lambda _v: NO_FLAGS)
    assert str(caught.value) == (
        "workloads[0].capacity.slo.p99_ttft_ms: capacity.slo.p99_ttft_ms must be a number of ms > 0, got '2s'"
    )
    few = {**CAPACITY, "num_prompts": 20}
    with pytest.raises(MatrixError) as caught:
        parse(matrix_with(few), lambda _v: NO_FLAGS)
    assert str(caught.value).startswith("workloads[0].num_prompts: num_prompts must be at least 100")


def test_an_objective_on_capacity_is_accepted_for_a_capacity_workload_only() -> None:
    objective = {"workload": "cap", "metric": "capacity", "goal": "max"}
    m = parse(matrix_with(CAPACITY, objective=objective), lambda _v: NO_FLAGS)
    assert m.objective == objective
    fixed = {"name": "cap", "input_len": 8, "output_len": 8}
    with pytest.raises(MatrixError) as caught:
        parse(matrix_with(fixed, objective=objective), lambda _v: NO_FLAGS)
    assert str(caught.value) == (
        "objective.metric: metric capacity needs workload 'cap' to be a capacity search (capacity:)"
    )


def test_pick_best_ranks_lines_by_capacity() -> None:
    def line(cid: str, capacity: float) -> dict[str, Any]:
        block = {"n": 1, "values": {"capacity": capacity}, "ci95": {}, "cv": {}, "repetitions": []}
        return {"id": cid, "status": "ok", "metrics": {"cap": block}}

    objective = {"workload": "cap", "metric": "capacity", "goal": "max"}
    lines = [line("a", 4.0), line("b", 9.5), line("c", 0.0)]
    best = results_contract.pick_best(lines, objective)
    assert best is not None and best["id"] == "b"


def test_the_screen_of_a_capacity_workload_is_a_short_capacity_search() -> None:
    (full,) = parse(matrix_with({**CAPACITY, "output_len": 512}), lambda _v: NO_FLAGS).workloads
    screen = strategies.screen_workload([full.to_dict()], "cap")
    w = bench_workload.Workload.from_dict(screen)  # runs as the client runs it
    assert w.name == strategies.SCREEN and w.capacity is not None
    assert (w.capacity.max_rounds, w.num_prompts, w.output_len) == (3, 100, 128)
    assert w.capacity.slo_dict() == full.run.capacity.slo_dict()  # type: ignore[union-attr]
