"""The stand-in's load model and its true capacity under a latency SLO (issue 26), and the
benchmark client's capacity search finding it on a live stand-in server."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import capacity_search
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_client import run_workload
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_workload import Workload
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from bwtune.standin import load_capacity as capacity
from bwtune.standin.load_capacity import RoundLoad, median_round, simulate_round, true_capacity
from bwtune.standin.performance import ConfigPerformance
from bwtune.standin.profile import load_profile, resolve_profile_path

from .conftest import BASE_FLAGS, Server

SLO = {"p99_ttft_ms": 2000, "p99_tpot_ms": 50}
# Short requests, so that a 100-request round at the capacity takes ~5 s of wall time.
LOAD = RoundLoad(input_len=128, output_len=32, requests=100)
FLAGS = {k.lstrip("-"): v for k, v in zip(BASE_FLAGS[::2], BASE_FLAGS[1::2], strict=True)}


@pytest.fixture
def queued_profile(tmp_path: Path) -> Path:
    """The shipped profile with 16 running requests at most (rounds of 100 requests queue)
    and no launch-to-launch spread (the live server is the profile's own speed, so what
    the search misses is its own error, not this launch's luck)."""
    data = yaml.safe_load(resolve_profile_path().read_text())
    data["serving"]["max_running_requests"] = 16
    data["noise"]["cv"] = 0.0
    path = tmp_path / "queued.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_capacity_model_does_not_import_the_code_it_checks() -> None:
    tree = ast.parse(Path(capacity.__file__).read_text())
    modules = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in modules if "plugins" in m or "bwtune.sglang" in m}, modules


def test_alone_a_request_waits_for_nothing_and_decodes_at_batch_1() -> None:
    profile = load_profile()
    perf = ConfigPerformance.for_flags(profile, FLAGS)
    m = simulate_round(perf, 16, 0.01, LOAD)  # one request every 100 s: never two at once
    assert m["p99_ttft_ms"] == pytest.approx(perf.prefill_seconds(LOAD.input_len) * 1000)
    assert m["p99_tpot_ms"] == pytest.approx(perf.step_seconds(1) * 1000)


def test_queueing_and_prefill_interference_show_in_the_percentiles(queued_profile: Path) -> None:
    perf = ConfigPerformance.for_flags(load_profile(str(queued_profile)), FLAGS)
    light, heavy = (median_round(perf, 16, rate, LOAD, 5) for rate in (4.0, 30.0))
    # Past 16 running requests the rest wait: TTFT is the queue plus the prefill.
    assert heavy["p99_ttft_ms"] > 5 * light["p99_ttft_ms"]
    # A fuller batch decodes slower, and prefills stall the decode in between (above batch 1's step).
    assert heavy["p99_tpot_ms"] > light["p99_tpot_ms"] > perf.step_seconds(1) * 1000


def test_true_capacity_is_the_highest_rate_whose_median_round_meets_the_slo(queued_profile: Path) -> None:
    profile = load_profile(str(queued_profile))
    cap = true_capacity(profile, FLAGS, SLO, LOAD)
    assert cap.max_running == 16 and not cap.lower_bound and cap.rate > 0
    perf = ConfigPerformance.for_flags(profile, FLAGS)
    assert capacity.meets(median_round(perf, 16, cap.rate, LOAD, 9), SLO)
    assert not capacity.meets(median_round(perf, 16, cap.rate * 1.05, LOAD, 9), SLO)
    # A tighter SLO serves less; one no request meets serves nothing.
    assert true_capacity(profile, FLAGS, {"p99_ttft_ms": 1000}, LOAD).rate < cap.rate
    assert true_capacity(profile, FLAGS, {"p99_ttft_ms": 5}, LOAD).rate == 0.0


@pytest.mark.parametrize("start_rate", [5.0, 10.0, 40.0])
def test_the_search_on_the_simulator_lands_within_10_percent(queued_profile: Path, start_rate: float) -> None:
    # The client's search against the load model itself (each round its own arrivals): fast,
    # and the same bracketing and bisection the live test below runs on a server.
    profile = load_profile(str(queued_profile))
    true = true_capacity(profile, FLAGS, SLO, LOAD).rate
    perf = ConfigPerformance.for_flags(profile, FLAGS)
    seeds = iter(range(100, 200))

    def measure(rate: float) -> dict[str, Any]:
        return {**simulate_round(perf, 16, rate, LOAD, seed=next(seeds)), "failed": 0}

    result = capacity_search.search(
        capacity_search.CapacitySpec.from_dict({"slo": SLO, "start_rate": start_rate}), measure
    )
    assert len(result["rounds"]) <= 6 and not result["lower_bound"]
    assert abs(result["value"] - true) <= 0.10 * true, (true, result["rounds"])


def test_bad_slo_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown SLO key 'p95_ttft_ms'"):
        true_capacity(load_profile(), FLAGS, {"p95_ttft_ms": 10}, LOAD)


# ---------------------------------------------------------------- on a live stand-in


def run_capacity(server: Server, **spec: Any) -> dict[str, Any]:
    w = Workload.from_dict(
        {"name": "cap", "input_len": LOAD.input_len, "output_len": LOAD.output_len, "capacity": spec}
    )
    return run_workload("127.0.0.1", server.port, w)


@pytest.mark.slow  # six 100-request rounds on a live stand-in: ~40 s
def test_the_search_finds_the_true_capacity_within_10_percent(
    launch: Callable[..., Server], queued_profile: Path
) -> None:
    true = true_capacity(load_profile(str(queued_profile)), FLAGS, SLO, LOAD).rate
    server = launch(*BASE_FLAGS, env={"BWTUNE_STANDIN_PROFILE": str(queued_profile)})
    server.wait_healthy()
    out = run_capacity(server, slo=SLO, start_rate=10.0)
    result = out["capacity"]
    assert len(result["rounds"]) <= 6
    assert result["lower_bound"] is False and result["first_failing"] is not None
    error = abs(result["value"] - true) / true
    print(f"true capacity {true:.2f} requests/s, measured {result['value']:.2f} ({error:.1%} off)")
    assert error <= 0.10, (true, result["rounds"])
    # The metrics block: capacity in values (what an objective ranks by) and the passing round's figures.
    assert out["values"]["capacity"] == result["value"]
    assert out["values"]["completed"] == 100 and out["values"]["failed"] == 0
    assert out["workload"]["capacity"]["slo"] == {k: float(v) for k, v in SLO.items()}
    # ...a valid results line, JSON as the results file writes it, ranked by an objective on capacity.
    line = results_contract.make_line(
        run_id="r1", host="gpu-a", config_id="c1", status="ok", metrics=json.loads(json.dumps({"cap": out}))
    )
    results_contract.validate_line(line)
    objective = {"workload": "cap", "metric": "capacity", "goal": "max"}
    assert results_contract.metric_value(line, objective) == result["value"]


@pytest.mark.slow  # two rounds on a live stand-in: ~15 s
def test_an_slo_no_load_meets_is_capacity_0_with_a_reason(launch: Callable[..., Server]) -> None:
    server = launch(*BASE_FLAGS)
    server.wait_healthy()
    # A prefill alone takes more than 20 ms: no rate meets a 5 ms TTFT.
    out = run_capacity(server, slo={"p99_ttft_ms": 5}, start_rate=40.0, max_rounds=2)
    result = out["capacity"]
    assert result["value"] == 0.0 and out["values"]["capacity"] == 0.0
    assert [r["load"] for r in result["rounds"]] == [40.0, 20.0]
    reason = "the SLO failed at every rate tried, down to 20 requests/s (p99_ttft_ms"
    assert result["reason"].startswith(reason)


@pytest.mark.slow  # two rounds on a live stand-in: ~10 s
def test_an_slo_met_at_every_load_tried_says_at_least(launch: Callable[..., Server]) -> None:
    server = launch(*BASE_FLAGS)
    server.wait_healthy()
    out = run_capacity(server, slo={"p99_ttft_ms": 60000}, start_rate=20.0, max_rate=40.0)
    result = out["capacity"]
    assert [r["load"] for r in result["rounds"]] == [20.0, 40.0]
    assert result["lower_bound"] is True and result["value"] == 40.0
    assert result["reason"] == "the SLO held at every rate tried: capacity at least 40 requests/s"
