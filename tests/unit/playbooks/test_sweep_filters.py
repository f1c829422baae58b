"""The sweep role's plan table (check mode) and end-of-play summary, and when the play fails."""

from __future__ import annotations

from typing import Any

from ansible_collections.bwtune.sglang.plugins.filter.plan_table import plan_table
from ansible_collections.bwtune.sglang.plugins.filter.sweep_summary import sweep_summary

OBJECTIVE = {"workload": "single", "metric": "output_throughput", "goal": "max"}


def line(config_id: str, status: str, value: float | None = None, **point: Any) -> dict[str, Any]:
    metrics = {"single": {"values": {"output_throughput": value}}} if value is not None else {}
    return {"config_id": config_id, "status": status, "metrics": metrics, "point": point}


def outcome(*lines: dict[str, Any], best: dict[str, Any] | None = None) -> dict[str, Any]:
    summary = {
        "run_id": "r1",
        "objective": OBJECTIVE,
        "simulated": True,
        "results_path": "/n/r1/results.jsonl",
    }
    return {"results": list(lines), "best": best, "summary": summary, "error": None}


def test_a_sweep_with_a_measured_config_passes_and_names_its_best() -> None:
    best = line("c1", "ok", 120.5, moe="cutlass")
    done = sweep_summary(
        outcome(best, line("c2", "crashed"), line("c3", "oom"), line("c4", "pruned"), best=best)
    )
    assert done["failed"] == ""
    assert done["lines"] == [
        "run r1: 4 configs, 3 launched, 1 measured ok, 2 failed, 1 not launched (simulated)",
        "failed by class: crashed 1, oom 1",
        "not launched: pruned 1",
        "best: c1 [moe=cutlass]: single output_throughput 120.5 (max)",
        "results: /n/r1/results.jsonl",
    ]


def test_configs_a_searching_strategy_left_out_and_re_measures_are_counted_by_config() -> None:
    """adaptive writes no line for what it did not launch, and a line per launch of a config
    it re-measured: the first line counts the plan's configs, the rest is "left out"."""
    best = line("c1", "ok", 120.5)
    result = outcome(best, line("c1", "ok", 119.5), line("c2", "ok", 80.0), line("c3", "pruned"), best=best)
    result["summary"].update(planned_configs=6, strategy="adaptive")
    done = sweep_summary(result)
    assert done["lines"][:2] == [
        "run r1: 6 configs, 3 launched, 3 measured ok, 0 failed, 4 not launched (simulated)",
        "not launched: left out by adaptive 3, pruned 1",
    ]


def test_all_launches_failed_fails_with_the_classes() -> None:
    done = sweep_summary(
        outcome(line("c1", "crashed"), line("c2", "crashed"), line("c3", "oom"), line("c4", "duplicate"))
    )
    assert done["failed"] == (
        "no config was measured: all 3 launches failed (crashed 2, oom 1); "
        "the log tails are in /n/r1/results.jsonl"
    )


def test_nothing_launched_fails_too_but_a_sweep_error_is_left_to_its_own_task() -> None:
    assert sweep_summary(outcome(line("c1", "pruned")))["failed"] == (
        "no config was measured: none was launched (pruned 1)"
    )
    errored = {**outcome(line("c1", "crashed")), "error": "the sweep process died"}
    assert sweep_summary(errored)["failed"] == ""


def test_the_plan_table_has_a_row_per_config_with_the_reason_it_is_not_launched() -> None:
    plan = {
        "sglang_version": "0.5.23",
        "gpu": "sm120",
        "model_path": "/m",
        "configs": [
            {"id": "c1", "point": {"moe": "cutlass", "mtp": True}, "status": "valid", "reasons": []},
            {
                "id": "c2",
                "point": {"moe": "trtllm", "mtp": False},
                "status": "pruned",
                "reasons": [{"kind": "hardware", "rule": "sm100-only"}, {"kind": "sglang", "rule": "x"}],
            },
            {"id": "c3", "point": {"moe": "auto", "mtp": True}, "status": "duplicate", "duplicate_of": "c1"},
        ],
        "summary": {
            "expanded": 3,
            "valid": 1,
            "pruned": 1,
            "duplicates": 1,
            "launches": 1,
            "workloads_per_launch": 2,
        },
    }
    assert plan_table(plan) == [
        "SGLang 0.5.23 on sm120: /m",
        "id  moe      mtp    status     reason",
        "--  -------  -----  ---------  " + "-" * len("hardware: sm100-only (+1)"),
        "c1  cutlass  true   valid",
        "c2  trtllm   false  pruned     hardware: sm100-only (+1)",
        "c3  auto     true   duplicate  same launch as c1",
        "3 configs: 1 valid, 1 pruned, 1 duplicates; 1 launches x 2 workloads",
    ]
