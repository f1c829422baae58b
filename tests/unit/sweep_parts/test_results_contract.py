"""The results contract (module_utils/_contracts/results_contract.py): one rule for node and controller."""

from __future__ import annotations

import json

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as rc
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_line
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies


def _line(config_id: str, status: str = "ok", value: float | None = 10.0, **extra: object) -> dict:
    metrics = {} if value is None else {"w": {"n": 1, "values": {"output_throughput": value}}}
    failure = None if status == "ok" else rc.make_failure(status, "why")
    return rc.make_line(
        run_id="r1", host="h", config_id=config_id, status=status, metrics=metrics, failure=failure, **extra
    )


def test_statuses_partition_into_ok_not_launched_and_failed() -> None:
    assert set(rc.STATUSES) == {rc.OK, *rc.NOT_LAUNCHED, *rc.LAUNCH_FAILURES}
    assert len(rc.STATUSES) == len(set(rc.STATUSES))
    assert rc.AUTH_FAILED in rc.LAUNCH_FAILURES and "port-conflict" not in rc.STATUSES
    assert not any(rc.is_failed(s) for s in (rc.OK, rc.PRUNED, rc.DUPLICATE))
    lines = [
        _line("a"),
        _line("b", screened_out=True),
        _line("c", "pruned", None),
        _line("d", "duplicate", None, duplicate_of="a"),
        _line("e", "crashed", None),
    ]
    assert rc.outcome_counts(lines) == {
        "ok": 2,
        "screened_out": 1,
        "failed": {"crashed": 1},
        "not_launched": {"duplicate": 1, "pruned": 1},
    }


def test_make_line_has_every_field_and_refuses_unknown_ones() -> None:
    line = _line("a")
    assert list(line) == list(rc.LINE_DEFAULTS)
    rc.validate_line(line)
    with pytest.raises(TypeError, match="launch_cmd"):
        rc.make_line(run_id="r", host="h", config_id="c", status="ok", launch_cmd=[])
    with pytest.raises(ValueError, match="port-conflict"):
        rc.make_failure("port-conflict", "lost a race")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"launch_command": "python -m sglang"}, "launch_command must be a list"),
        ({"screened_out": "yes"}, "screened_out"),
        ({"run_id": "../../tmp/x"}, "run_id"),
        ({"status": "port-conflict"}, "status 'port-conflict'"),
    ],
)
def test_validator_names_the_bad_field(change: dict, message: str) -> None:
    with pytest.raises(rc.ResultsFormatError, match=message):
        rc.validate_line({**_line("a"), **change}, "f:3")


@pytest.mark.parametrize("run_id", ["", ".hidden", "..", "a/b", "../x", "-x", "a b", "a\\b", "x" * 129, None])
def test_bad_run_ids_are_refused(run_id: object) -> None:
    assert rc.run_id_problem(run_id)
    with pytest.raises(ValueError, match="not a run id"):
        rc.check_run_id(run_id, "--run-id")


def test_good_run_ids_pass() -> None:
    for run_id in ("20261130T154313Z-ab12", "r1", "demo.2", "a:b+c@d_e"):
        assert rc.check_run_id(run_id) == run_id


def test_torn_last_line_skipped_with_warning_damage_in_the_middle_refused() -> None:
    good = json.dumps(_line("a")).encode()
    records, warnings = rc.parse_jsonl(good + b"\n" + good[:40], "r.jsonl")
    assert [r["config_id"] for r in records] == ["a"]
    assert warnings == ["r.jsonl:2: skipped a torn last line (40 bytes, no newline: a write cut short)"]
    # A whole last line that lost only its newline is kept (nothing measured is lost).
    records, warnings = rc.parse_jsonl(good + b"\n" + good, "r.jsonl")
    assert len(records) == 2 and warnings == []
    with pytest.raises(rc.ResultsFormatError, match=r"r.jsonl:2: not a JSON line"):
        rc.parse_jsonl(good + b"\n" + good[:40] + b"\n" + good + b"\n", "r.jsonl")
    # A complete line that does not parse is damage, even last.
    with pytest.raises(rc.ResultsFormatError, match=r"r.jsonl:2"):
        rc.parse_jsonl(good + b"\n" + good[:40] + b"\n", "r.jsonl")


def test_default_objective_is_the_same_for_node_strategies_and_controller() -> None:
    matrix = {"workloads": [{"name": "chat"}, {"name": "long"}]}
    assert rc.objective_of(matrix) == {"workload": "chat", "metric": "output_throughput", "goal": "max"}
    node = strategies.Objective.from_matrix(matrix)
    assert node.as_dict() == rc.objective_of(matrix)
    with pytest.raises(ValueError, match="goal 'up'"):
        rc.normalize_objective({"goal": "up"})


def test_best_is_status_ok_only_and_ties_break_by_id() -> None:
    objective = {"workload": "w", "metric": "output_throughput", "goal": "max"}
    wrong = {**_line("z", "wrong-output", None), "metrics": {"w": {"values": {"output_throughput": 99.0}}}}
    lines = [_line("b", value=10.0), _line("a", value=10.0), wrong, _line("c", value=5.0)]
    assert rc.pick_best(lines, objective)["config_id"] == "a"
    assert rc.pick_best(lines, {**objective, "goal": "min"})["config_id"] == "c"
    board = strategies.Scoreboard(strategies.Objective("w", "output_throughput"))
    for line in lines:
        board.record(line)
    assert board.best() == "a"


def test_mean_ci95_uses_exact_t_quantiles() -> None:
    mean, ci, cv = rc.mean_ci95([10.0, 12.0, 14.0])
    assert mean == 12.0 and cv == pytest.approx(2.0 / 12.0)
    # t(0.975, 2) = 4.302653: half width 4.302653 * 2 / sqrt(3)
    assert ci == pytest.approx((12.0 - 4.968275, 12.0 + 4.968275), abs=1e-5)
    # df = 35 lies between the rows of a printed table; exact t(0.975, 35) = 2.030108
    values = [float(i % 7) for i in range(36)]
    _mean, (low, high), _cv = rc.mean_ci95(values)
    sd = (sum((v - _mean) ** 2 for v in values) / 35) ** 0.5
    assert (high - low) / 2 == pytest.approx(2.030108 * sd / 6, rel=1e-5)
    assert rc.mean_ci95([3.0]) == (3.0, None, None)
    assert rc.intervals_overlap((1, 3), (2, 4)) and not rc.intervals_overlap((1, 2), (2.5, 3))


def test_versioned_puts_the_schema_first() -> None:
    assert list(rc.versioned({"b": 1, "schema": 9})) == ["schema", "b"]
    assert rc.versioned({})["schema"] == rc.OUTPUT_SCHEMA_VERSION


def test_launches_under_different_workloads_are_never_pooled_or_ranked_together() -> None:
    # A run measured at concurrency 1, then its matrix edited to 8 and a re-measure (--force):
    # the old launches are kept, but neither averaged with the new ones nor ranked against them.
    objective = {"workload": "w", "metric": "m", "goal": "max"}

    def line(config: str, value: float, concurrency: int, finished: str) -> dict:
        block = {"values": {"m": value}, "workload": {"name": "w", "concurrency": concurrency}}
        return {**_line(config), "metrics": {"w": block}, "finished_at": finished}

    old_a, old_b = line("ca", 900.0, 1, "2026-01-01T00:00:01"), line("cb", 50.0, 1, "2026-01-01T00:00:02")
    new_a = line("ca", 100.0, 8, "2026-01-02T00:00:01")
    new_b = line("cb", 200.0, 8, "2026-01-02T00:00:02")
    lines = [old_a, old_b, new_a, new_b]
    pooled = rc.pooled_launches(lines, objective)
    assert pooled[rc.launch_key(new_a)][0] == 100.0  # not (900 + 100) / 2
    assert rc.pick_best(lines, objective) is new_b
    # Only old_a re-measured so far: the configs still at concurrency 1 do not compete.
    assert rc.pick_best([old_a, old_b, new_a], objective) is new_a


def _slow_metric_block_problem(block: dict, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """_validate_metric_block's verdict with its fast route turned off: one value at a time."""
    with monkeypatch.context() as patch:
        patch.setattr(results_line, "_metric_block_is_plain", lambda block: False)
        try:
            results_line._validate_metric_block(block, "f:1: metrics['w']")
        except rc.ResultsFormatError as exc:
            return str(exc)
    return None


@pytest.mark.parametrize(
    "block",
    [
        {
            "n": 2,
            "values": {"a": 1.5, "b": 3},
            "repetitions": [{"a": 1.0}, {"a": 2}],
            "ci95": {"a": [1, 2.5]},
        },
        {"values": {}, "repetitions": [], "ci95": {}},
        {"values": {"a": 1e308, "b": 1e308}},  # finite values whose sum overflows
        {"values": {"a": None, "b": 1.0}, "ci95": {"a": None, "b": [None, 2.0]}},
        {"values": {"a": float("nan")}},
        {"values": {"a": float("inf"), "b": float("-inf")}},
        {"values": {"a": True}},
        {"values": {"a": "1.0"}},
        {"values": [1.0]},
        {"values": None},
        {"values": {"a": 1.0}, "repetitions": [{"a": 1.0}, [2.0]]},
        {"values": {"a": 1.0}, "repetitions": {"a": 1.0}},
        {"values": {"a": 1.0}, "repetitions": [{"a": float("nan")}]},
        {"values": {"a": 1.0}, "ci95": {"a": [1.0]}},
        {"values": {"a": 1.0}, "ci95": {"a": [1.0, float("inf")]}},
        {"values": {"a": 1.0}, "ci95": {"a": (1.0, 2.0)}},
    ],
)
def test_metric_block_fast_route_decides_as_the_value_by_value_checks(
    block: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The import checks hundreds of values a line by a fast route (issue 21 #15); it may only
    # pass a block the value-by-value checks pass, and a bad one gets their message.
    expected = _slow_metric_block_problem(block, monkeypatch)
    try:
        results_line._validate_metric_block(block, "f:1: metrics['w']")
        got = None
    except rc.ResultsFormatError as exc:
        got = str(exc)
    assert got == expected
    assert not (results_line._metric_block_is_plain(block) and expected is not None)


def test_metric_block_fast_route_takes_the_plain_blocks_a_node_writes() -> None:
    block = {
        "n": 2,
        "values": {"t": 1.0, "c": 64},
        "cv": {"t": 0.01},
        "repetitions": [{"t": 1.0, "c": 64}, {"t": 1.2, "c": 64}],
        "ci95": {"t": [0.9, 1.3]},
    }
    assert results_line._metric_block_is_plain(block)
    assert not results_line._metric_block_is_plain({**block, "values": {"t": None}})  # the slow route decides
