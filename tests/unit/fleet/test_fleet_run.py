"""A fleet sweep's state over rounds (bwtune.fleet.fleet_run): built from the nodes' plans
and facts, every launch in exactly one host's share after any sequence of lost hosts, a
finished launch never moving, a lost host never given a launch again (even when it comes
back with lines), the merge counting each config once, the state the same after a save and
a load, and the same shares whatever order the hosts came in. Property tests (hypothesis,
derandomized)."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bwtune.fleet import fleet_run, shares

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)
FACTS = {
    "bwtune_gpu": {
        "available": True,
        "count": 8,
        "sm": "sm120",
        "interconnect": "pcie",
        "gpus": [{"name": "NVIDIA RTX PRO 6000"}] * 8,
    },
    "bwtune_stack": {"fingerprint": "f00d"},
}
FOUR = {
    **FACTS,
    "bwtune_gpu": {**FACTS["bwtune_gpu"], "count": 4, "gpus": [{"name": "NVIDIA RTX PRO 6000"}] * 4},
}


def a_plan(ids: list[str], unlaunched: int = 2) -> dict[str, Any]:
    configs = [{"id": i, "point": {"axis": n % 3}, "status": "valid"} for n, i in enumerate(ids)]
    configs += [{"id": f"cpruned{n:04d}", "point": {}, "status": "pruned"} for n in range(unlaunched)]
    return {
        "configs": configs,
        "launches": [{"config": i, "workloads": [{"name": "chat"}]} for i in ids],
        "summary": {"estimate": {"startup_s": 300.0, "per_launch_s": 420.0}},
    }


def line(config: str, host: str, status: str = "ok") -> dict[str, Any]:
    return {"config_id": config, "host": host, "status": status}


def no_lines(_group: Any, _plan: Any) -> list[dict[str, Any]]:
    return []


ids_lists = st.lists(st.from_regex(r"c[0-9a-f]{10}", fullmatch=True), min_size=0, max_size=30, unique=True)
host_lists = st.lists(st.from_regex(r"h[a-z0-9]{0,5}", fullmatch=True), min_size=1, max_size=6, unique=True)


def built(ids: list[str], hosts: list[str]) -> fleet_run.FleetState:
    return fleet_run.build("r1", {h: a_plan(ids) for h in hosts}, {h: FACTS for h in hosts}, no_lines)


def every_share(state: fleet_run.FleetState) -> Counter[str]:
    return Counter(i for g in state.groups for ids in g.by_host.values() for i in ids)


@SETTINGS
@given(ids_lists, host_lists, st.data())
def test_after_any_lost_hosts_every_launch_is_in_exactly_one_share(
    ids: list[str], hosts: list[str], data: st.DataObject
) -> None:
    state = built(ids, hosts)
    assert every_share(state) == Counter(ids), "disjoint and complete"
    done: dict[str, set[str]] = {}
    for _round in range(len(hosts)):
        alive = [h for h in hosts if h not in state.lost()]
        if len(alive) < 2:
            break
        lost = data.draw(st.sampled_from(alive))
        todo = state.todo(done)
        # Each host finished some of what it had to do this round; the lost one too.
        for host, left in todo.items():
            done.setdefault(host, set()).update(
                data.draw(st.lists(st.sampled_from(left), unique=True)) if left else []
            )
        before = {h: set(state.share_of(h)) for h in hosts}
        state.rounds += 1
        entry = state.lose(lost, done.get(lost, set()), "lost")
        assert every_share(state) == Counter(ids), "still disjoint and complete"
        for host in hosts:
            finished = before[host] & done.get(host, set())
            assert finished <= set(state.share_of(host)), "a finished launch never moves"
        assert set(state.share_of(lost)) == before[lost] & done.get(lost, set())
        for host in state.lost():
            assert set(state.share_of(host)) <= done.get(host, set()), "a lost host keeps its finished only"
            assert host not in state.todo(done)
        moved = sorted(i for group in entry["to"].values() for i in group)
        assert moved == sorted(before[lost] - done.get(lost, set()))
        assert lost not in entry["to"]


@SETTINGS
@given(ids_lists, host_lists)
def test_the_shares_are_the_same_whatever_order_the_hosts_come_in(ids: list[str], hosts: list[str]) -> None:
    forward = built(ids, hosts)
    backward = fleet_run.build(
        "r1", {h: a_plan(ids) for h in reversed(hosts)}, {h: FACTS for h in reversed(hosts)}, no_lines
    )
    assert forward.as_dict() == backward.as_dict()


@SETTINGS
@given(ids_lists, host_lists)
def test_a_saved_state_loads_back_the_same(ids: list[str], hosts: list[str]) -> None:
    state = built(ids, hosts)
    if len(hosts) > 1:
        state.rounds = 1
        state.lose(hosts[0], set(state.share_of(hosts[0])[:1]), "gone")
    with tempfile.TemporaryDirectory() as folder:
        state.save(Path(folder))
        loaded = fleet_run.FleetState.load(Path(folder))
    assert loaded is not None and loaded.as_dict() == state.as_dict()


def test_hosts_of_other_hardware_or_another_plan_are_other_groups() -> None:
    ids = [f"c{n:010x}" for n in range(6)]
    plans = {"big-1": a_plan(ids), "big-2": a_plan(ids), "small": a_plan(ids), "other-plan": a_plan(ids[:3])}
    facts = {"big-1": FACTS, "big-2": FACTS, "small": FOUR, "other-plan": FACTS}
    state = fleet_run.build("r1", plans, facts, no_lines)
    assert sorted(g.hosts for g in state.groups) == [["big-1", "big-2"], ["other-plan"], ["small"]]
    for group in state.groups:
        assert sorted(i for ids_ in group.by_host.values() for i in ids_) == sorted(group.launches)


def test_the_merge_counts_each_config_once_and_drops_a_returned_hosts_reassigned_line() -> None:
    ids = ["c0000000001", "c0000000002", "c0000000003", "c0000000004"]
    state = built(ids, ["a", "b"])
    b_share = state.share_of("b")
    state.rounds = 1
    state.lose("b", {b_share[0]}, "killed")
    moved = b_share[1:]
    lines = {
        "a": [line(i, "a") for i in state.share_of("a")] + [line("cpruned0000", "a", "pruned")],
        # b came back: its finished launch, and a line of one given to a since.
        "b": [line(b_share[0], "b"), line(moved[0], "b"), line("cpruned0000", "b", "pruned")],
    }
    kept, messages = fleet_run.merge(state, lines, {})
    counted = Counter(entry["config_id"] for host_lines in kept.values() for entry in host_lines)
    assert set(counted.values()) == {1} and set(counted) == {*ids, "cpruned0000"}
    assert [entry["config_id"] for entry in kept["b"]] == [b_share[0]]
    assert messages == [
        f"host b also measured {moved[0]}, which a measured: its line is not kept "
        "(each config is counted once)"
    ]
    # What the database already keeps for the run wins: a resume never counts a config twice.
    kept_again, _ = fleet_run.merge(
        state, {"b": [line("cpruned0000", "b", "pruned")]}, {"a": {"cpruned0000"}}
    )
    assert kept_again == {}


def test_losing_the_last_host_with_launches_left_is_an_error_naming_it() -> None:
    state = built(["c0000000001", "c0000000002"], ["a", "b"])
    state.lose("a", set(), "gone")
    with pytest.raises(shares.SharesError, match="'b' was the group's last host"):
        state.lose("b", set(), "gone")


def test_a_state_written_by_another_bwtune_is_one_line(tmp_path: Path) -> None:
    (tmp_path / fleet_run.STATE_FILE).write_text('{"version": 99, "run_id": "r1", "groups": []}')
    with pytest.raises(fleet_run.FleetError, match=r"fleet.json: not a fleet sweep's state \(version 99"):
        fleet_run.FleetState.load(tmp_path)


@pytest.mark.parametrize(
    ("strategy", "hosts", "fleet"), [("grid", 2, True), ("grid", 1, False), ("adaptive", 4, False)]
)
def test_a_fleet_is_a_grid_on_more_than_one_host(strategy: str, hosts: int, fleet: bool) -> None:
    assert fleet_run.applies(strategy, [f"h{n}" for n in range(hosts)]) is fleet
