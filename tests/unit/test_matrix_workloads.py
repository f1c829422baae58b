"""Matrix workloads: every key the benchmark client accepts, validated by the client's own
Workload (one definition), each bad value one line naming its key path."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import bench_client, bench_workload
from ansible_collections.bwtune.sglang.plugins.module_utils._bench.bench_stats import Slo
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError, parse
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import FlagTable

# Workloads touch no flag: an empty flag table keeps these tests off the generated catalog.
NO_FLAGS = FlagTable("0.5.23", "test", {})


def matrix_with(*workloads: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": {"path": "/models/m"},
        "hardware": {"gpu": "sm120"},
        "sglang": {"version": "0.5.23"},
        "axes": {},
        "workloads": list(workloads),
    }


def workloads_of(*workloads: dict[str, Any]) -> list[Any]:
    return parse(matrix_with(*workloads), lambda _version: NO_FLAGS).workloads


def error_of(*workloads: dict[str, Any]) -> MatrixError:
    with pytest.raises(MatrixError) as caught:
        workloads_of(*workloads)
    return caught.value


FULL = {
    "name": "chat",
    "input_len": 512,
    "output_len": 128,
    "concurrency": 16,
    "num_prompts": 64,
    "warmup": 4,
    "repetitions": 3,
    "seed": 7,
    "api": "completions",
    "stream": False,
    "slo": {"ttft_ms": 500},
    "slo_tpot_ms": 40,
    "estimate_s": 90,
}


def test_every_client_key_is_accepted_and_reaches_the_client() -> None:
    (w,) = workloads_of(FULL)
    assert w.run == bench_client.Workload(
        name="chat",
        input_len=512,
        output_len=128,
        concurrency=16,
        num_prompts=64,
        warmup=4,
        repetitions=3,
        seed=7,
        api="completions",
        stream=False,
        slo=Slo(ttft_ms=500, tpot_ms=40),
    )
    assert w.estimate_s == 90.0


def test_the_matrix_knows_exactly_the_clients_keys() -> None:
    # The client's dataclass fields are the source; the matrix adds nothing but estimate_s.
    fields = set(bench_client.Workload.__dataclass_fields__)
    assert set(bench_workload.WORKLOAD_KEYS) == fields | {
        "slo_ttft_ms",
        "slo_tpot_ms",
        "slo_e2e_ms",
        "estimate_s",
    }
    for key in fields - {"name", "input_len", "output_len"}:
        # each optional key alone is accepted (or refused for its value, never as unknown)
        try:
            workloads_of({"name": "w", "input_len": 8, "output_len": 8, key: None})
        except MatrixError as err:
            assert "unknown" not in err.message, key


def test_plan_dicts_are_complete_and_round_trip_through_the_client() -> None:
    (short, _) = workloads_of(
        {"name": "short", "input_len": 8, "output_len": 4},
        {"name": "open", "input_len": 8, "output_len": 4, "concurrency": None, "request_rate": 2.5},
    )
    d = short.to_dict()
    # Every key is written out, so the sweep does not depend on anyone's defaults.
    assert set(d) == set(bench_client.Workload.__dataclass_fields__) - {"slo", "capacity"}  # unset: left out
    assert d["concurrency"] == 1 and d["num_prompts"] == 1  # documented: num_prompts = concurrency
    assert bench_client.Workload.from_dict(d) == short.run
    (full,) = workloads_of(FULL)
    d = full.to_dict()
    assert d["estimate_s"] == 90.0 and d["slo"] == {"ttft_ms": 500, "tpot_ms": 40}
    assert bench_client.Workload.from_dict(d) == full.run


def test_open_loop_defaults() -> None:
    (w,) = workloads_of(
        {"name": "open", "input_len": 8, "output_len": 4, "concurrency": None, "request_rate": 2}
    )
    assert (w.run.concurrency, w.run.request_rate, w.run.num_prompts) == (None, 2, 64)


@pytest.mark.parametrize(
    ("edit", "path", "words"),
    [
        ({"concurency": 4}, ("workloads", 0, "concurency"), "unknown workload key 'concurency'"),
        ({"warmup": -1}, ("workloads", 0, "warmup"), "warmup must be an integer >= 0, got -1"),
        ({"warmup": True}, ("workloads", 0, "warmup"), "warmup must be an integer >= 0, got True"),
        ({"repetitions": 0}, ("workloads", 0, "repetitions"), "repetitions must be an integer >= 1, got 0"),
        ({"seed": "x"}, ("workloads", 0, "seed"), "seed must be an integer, got 'x'"),
        ({"api": "chat"}, ("workloads", 0, "api"), "api must be one of generate, completions, got 'chat'"),
        ({"stream": "yes"}, ("workloads", 0, "stream"), "stream must be true or false, got 'yes'"),
        ({"request_rate": 0}, ("workloads", 0, "request_rate"), "request_rate must be a number > 0, got 0"),
        ({"concurrency": 0}, ("workloads", 0, "concurrency"), "concurrency must be an integer >= 1"),
        ({"input_len": 1.5}, ("workloads", 0, "input_len"), "input_len must be an integer >= 1, got 1.5"),
        ({"slo": {"ttft": 5}}, ("workloads", 0, "slo", "ttft"), "unknown slo key 'ttft'"),
        (
            {"slo": {"ttft_ms": -5}},
            ("workloads", 0, "slo", "ttft_ms"),
            "slo.ttft_ms must be a number of ms > 0",
        ),
        ({"slo": [1]}, ("workloads", 0, "slo"), "slo must be a mapping"),
        (
            {"slo_e2e_ms": "fast"},
            ("workloads", 0, "slo_e2e_ms"),
            "slo_e2e_ms must be a number of ms > 0, got 'fast'",
        ),
        (
            {"slo_ttft_ms": 1, "slo": {"ttft_ms": 2}},
            ("workloads", 0, "slo_ttft_ms"),
            "slo_ttft_ms is also set as slo.ttft_ms",
        ),
        ({"estimate_s": 0}, ("workloads", 0, "estimate_s"), "expected a positive number, got 0"),
        ({"output_len": None}, ("workloads", 0), "missing output_len"),
        ({"name": 3}, ("workloads", 0, "name"), "expected a workload name, got 3"),
    ],
)
def test_a_bad_workload_is_one_line_naming_its_key(
    edit: dict[str, Any], path: tuple[Any, ...], words: str
) -> None:
    err = error_of({"name": "w", "input_len": 8, "output_len": 8, **edit})
    assert err.path == path
    assert words in err.message
    assert "\n" not in str(err)
    assert str(err).startswith("workloads[0]")


def test_unknown_key_lists_the_known_ones() -> None:
    message = error_of({"name": "w", "input_len": 8, "output_len": 8, "rate": 1}).message
    for key in (
        "warmup",
        "repetitions",
        "seed",
        "api",
        "stream",
        "slo",
        "slo_ttft_ms",
        "request_rate",
        "estimate_s",
    ):
        assert key in message


def test_duplicate_names_are_refused() -> None:
    err = error_of(
        {"name": "w", "input_len": 8, "output_len": 8}, {"name": "w", "input_len": 8, "output_len": 8}
    )
    assert err.path == ("workloads", 1, "name") and "defined twice" in err.message
