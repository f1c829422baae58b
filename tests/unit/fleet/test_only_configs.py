"""The node's share of a fleet sweep (issue 25): the sweep module's `only_configs`.

The node plans the whole matrix (the same pruned and duplicate lines as without a share),
launches only its share, and neither writes a line for nor lists as left out the launches
that are another host's. Launches are faked (no server); the planner, the strategy, the
results file and the outcome are the real ones (tests/unit/sweep/test_resume_lines.py's
helpers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner
from tests.unit.sweep.test_resume_lines import fake_launches, file_lines, options, run


def launch_ids(opts: sweep_runner.SweepOptions) -> list[str]:
    return [launch["config"] for launch in sweep_runner.make_plan(opts)["launches"]]


def unlaunched(outcome: dict[str, Any], key: str) -> list[str]:
    return [entry["config"] for entry in outcome["summary"][key]]


def test_two_shares_launch_each_config_once_and_write_the_same_unlaunched_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = launch_ids(options(tmp_path / "plan"))
    assert len(ids) == 3
    shares = {"node-a": ids[:1], "node-b": ids[1:]}
    outcomes, launched = {}, {}
    for node, share in shares.items():
        launched[node] = fake_launches(monkeypatch)
        outcomes[node] = run(options(tmp_path / node, node=node, only_configs=share))
    assert launched == shares  # each config launched once, on its host, in the plan's order
    not_launched = {}
    for node in shares:
        lines = file_lines(options(tmp_path / node, node=node))
        not_launched[node] = sorted(
            (line["config_id"], line["status"]) for line in lines if line["status"] in ("pruned", "duplicate")
        )
    assert not_launched["node-a"] == not_launched["node-b"] and len(not_launched["node-a"]) == 2
    for node, outcome in outcomes.items():
        ok = [line["config_id"] for line in outcome["results"] if line["status"] == "ok"]
        assert ok == shares[node]
        assert unlaunched(outcome, "left_out") == []  # the others are another host's, not left out
        assert outcome["summary"]["launches"] == len(shares[node])
        assert outcome["summary"]["saved_launches"] == 0


def test_a_stopped_share_lists_only_its_own_launches_as_not_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = launch_ids(options(tmp_path / "plan"))
    fake_launches(monkeypatch, stop_after=1)
    outcome = run(options(tmp_path, only_configs=ids[1:]))
    assert outcome["error"]
    assert unlaunched(outcome, "not_reached") == ids[2:]
    # The resume of the share launches what it had left, and nothing of another host's.
    launched = fake_launches(monkeypatch)
    again = run(options(tmp_path, only_configs=ids[1:]))
    assert launched == ids[2:] and again["error"] is None
    assert sorted(line["config_id"] for line in again["results"] if line["status"] == "ok") == sorted(ids[1:])


def test_an_empty_share_launches_nothing_and_records_the_unlaunched_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched = fake_launches(monkeypatch)
    outcome = run(options(tmp_path, only_configs=[]))
    assert launched == []
    assert sorted(line["status"] for line in outcome["results"]) == ["duplicate", "pruned"]
    assert unlaunched(outcome, "left_out") == []


@pytest.mark.parametrize(
    ("given", "why"),
    [
        (["c0000000000"], r"^only_configs: 'c0000000000' is not a config of this node's plan \(gpu sm120"),
        ("c1", r"^only_configs: expected a list of config ids, got 'c1'$"),
        ([""], r"^only_configs\[0\]: '' is not a config id$"),
    ],
)
def test_a_share_the_plan_does_not_have_is_refused_before_anything_runs(
    tmp_path: Path, given: Any, why: str
) -> None:
    with pytest.raises(sweep_runner.BadInput, match=why):
        opts = options(tmp_path, only_configs=given)
        sweep_runner.make_plan(opts)
    assert not (tmp_path / "node").exists()


def test_a_pruned_or_twice_named_config_in_a_share_is_refused(tmp_path: Path) -> None:
    the_plan = sweep_runner.make_plan(options(tmp_path))
    pruned = next(c["id"] for c in the_plan["configs"] if c["status"] == "pruned")
    with pytest.raises(
        sweep_runner.BadInput, match=rf"^only_configs: '{pruned}' is pruned in this node's plan"
    ):
        sweep_runner.make_plan(options(tmp_path, only_configs=[pruned]))
    one = the_plan["launches"][0]["config"]
    with pytest.raises(sweep_runner.BadInput, match=rf"^only_configs\[1\]: '{one}' is listed twice$"):
        options(tmp_path, only_configs=[one, one])


@pytest.mark.parametrize("strategy", ["adaptive", "screen", "coordinate"])
def test_a_share_is_for_grid_only(tmp_path: Path, strategy: str) -> None:
    with pytest.raises(sweep_runner.BadInput, match=rf"^only_configs: given with strategy '{strategy}'"):
        options(tmp_path, strategy=strategy, only_configs=[])
