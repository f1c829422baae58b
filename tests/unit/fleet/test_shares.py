"""Sharing a group's launches among its hosts: disjoint and complete, balanced, the same on
a resume, and a lost host's unfinished launches reassigned without moving a finished one.
Property tests over random plans, costs and 1-8 hosts (hypothesis, derandomized: every run
checks the same cases)."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bwtune.fleet.shares import Launch, Shares, SharesError, reassign, share

SETTINGS = settings(max_examples=250, deadline=None, derandomize=True)

costs = st.one_of(
    st.floats(min_value=0, max_value=3600, allow_nan=False),
    st.integers(min_value=0, max_value=3600),
    st.sampled_from([0.0, 60.0, 600.0]),  # many equal costs: the ties must be decided alike
)
plans = st.lists(st.tuples(st.from_regex(r"c[0-9a-f]{10}", fullmatch=True), costs), max_size=60).map(
    lambda pairs: [Launch(i, c) for i, c in dict(pairs).items()]
)
host_lists = st.integers(min_value=1, max_value=8).flatmap(
    lambda n: st.lists(
        st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True), min_size=n, max_size=n, unique=True
    )
)


def loads(
    shares: Shares, hosts: list[str], done: set[str] | frozenset[str] = frozenset()
) -> dict[str, float]:
    return {host: shares.load_s(host, done) for host in hosts}


def assigned(shares: Shares) -> Counter[str]:
    return Counter(i for ids in shares.by_host.values() for i in ids)


@SETTINGS
@given(plans, host_lists)
def test_every_launch_goes_to_exactly_one_host_of_the_group(launches: list[Launch], hosts: list[str]) -> None:
    shares = share(launches, hosts)
    assert set(shares.by_host) == set(hosts)
    counts = assigned(shares)
    assert set(counts) == {launch.id for launch in launches}, "complete"
    assert all(n == 1 for n in counts.values()), "disjoint"
    for host, ids in shares.by_host.items():
        order = [launch.id for launch in launches if launch.id in ids]
        assert list(ids) == order, f"{host}: its share in the plan's order"


@SETTINGS
@given(plans, host_lists)
def test_no_host_carries_more_than_the_mean_plus_the_costliest_launch(
    launches: list[Launch], hosts: list[str]
) -> None:
    shares = share(launches, hosts)
    per_host = loads(shares, hosts)
    mean = sum(launch.cost_s for launch in launches) / len(hosts)
    biggest = max((launch.cost_s for launch in launches), default=0.0)
    assert max(per_host.values()) <= mean + biggest + 1e-6 * (1 + mean)


@SETTINGS
@given(plans, host_lists, st.randoms(use_true_random=False))
def test_a_resume_recomputes_the_same_shares_whatever_the_order(
    launches: list[Launch], hosts: list[str], rng: object
) -> None:
    first = share(launches, hosts)
    shuffled_launches, shuffled_hosts = list(launches), list(hosts)
    rng.shuffle(shuffled_launches)  # type: ignore[attr-defined]
    rng.shuffle(shuffled_hosts)  # type: ignore[attr-defined]
    again = share(shuffled_launches, shuffled_hosts)
    assert {h: set(ids) for h, ids in again.by_host.items()} == {
        h: set(ids) for h, ids in first.by_host.items()
    }
    assert share(launches, hosts) == first


@SETTINGS
@given(plans, host_lists, st.data())
def test_a_lost_hosts_unfinished_launches_go_to_the_others_and_nothing_finished_moves(
    launches: list[Launch], hosts: list[str], data: st.DataObject
) -> None:
    shares = share(launches, hosts)
    lost = data.draw(st.sampled_from(hosts))
    every = [launch.id for launch in launches]
    done = set(data.draw(st.lists(st.sampled_from(every), unique=True)) if every else [])
    orphans = [i for i in shares.by_host[lost] if i not in done]
    if orphans and len(hosts) == 1:
        with pytest.raises(SharesError, match="last host"):
            reassign(shares, lost, done)
        return
    after = reassign(shares, lost, done)
    counts = assigned(after)
    assert set(counts) == set(every) and all(n == 1 for n in counts.values()), "still disjoint and complete"
    for launch_id in done:
        assert after.host_of(launch_id) == shares.host_of(launch_id), "a finished launch never moves"
    assert all(i in done for i in after.by_host[lost]), "the lost host keeps its finished launches only"
    for launch_id in orphans:
        assert after.host_of(launch_id) != lost
    for host in hosts:
        if host != lost:
            assert set(shares.by_host[host]) <= set(after.by_host[host]), "nothing taken from a host left"
    # Balanced on what is left to run: a host is loaded past the mean plus the costliest
    # orphan only by what it had already.
    others = [h for h in hosts if h != lost]
    before, now = loads(shares, others, done), loads(after, others, done)
    mean = sum(now.values()) / len(others) if others else 0.0
    biggest = max((shares.costs[i] for i in orphans), default=0.0)
    for host in others:
        if now[host] > before[host]:
            assert now[host] <= mean + biggest + 1e-6 * (1 + mean)
    assert reassign(shares, lost, done) == after, "the same reassignment on a resume"


def test_a_second_lost_host_never_gets_work_back_and_the_last_one_is_refused() -> None:
    shares = share([Launch(f"c{n}", float(n + 1)) for n in range(12)], ["a", "b", "c"])
    after_a = reassign(shares, "a", done_ids=set())
    assert after_a.by_host["a"] == () and after_a.lost == {"a"}
    after_b = reassign(after_a, "b", done_ids={"c0"})
    assert after_b.by_host["a"] == ()
    assert set(after_b.by_host["b"]) <= {"c0"}
    assert sorted(after_b.by_host["c"]) == sorted({f"c{n}" for n in range(12)} - set(after_b.by_host["b"]))
    with pytest.raises(SharesError, match="'c' was the group's last host"):
        reassign(after_b, "c", done_ids={"c0"})
    everything = {f"c{n}" for n in range(12)}
    assert reassign(after_b, "c", done_ids=everything).by_host["c"] == after_b.by_host["c"], "all done: fine"


def test_costliest_first_to_the_least_loaded_host() -> None:
    shares = share(
        [Launch("a", 5), Launch("b", 4), Launch("c", 3), Launch("d", 3), Launch("e", 3)], ["h1", "h2"]
    )
    # LPT: a->h1, b->h2, c->h2 (4<5), d->h1 (5<7), e->h1 or h2 at 8 vs 7: h2.
    assert shares.by_host == {"h1": ("a", "d"), "h2": ("b", "c", "e")}
    assert shares.load_s("h1") == 8 and shares.load_s("h2") == 10


@pytest.mark.parametrize(
    ("launches", "hosts", "message"),
    [
        ([Launch("a", 1)], [], "the group has no hosts"),
        ([Launch("a", 1)], ["h", "h"], "host 'h' is named twice"),
        ([Launch("a", 1), Launch("a", 2)], ["h"], "launch 'a' is listed twice"),
        ([Launch("a", -1)], ["h"], "launch 'a' has cost -1"),
        ([Launch("a", math.nan)], ["h"], "launch 'a' has cost nan"),
        ([Launch("a", math.inf)], ["h"], "launch 'a' has cost inf"),
    ],
)
def test_bad_input_is_one_line_naming_the_value(
    launches: list[Launch], hosts: list[str], message: str
) -> None:
    with pytest.raises(SharesError, match=message):
        share(launches, hosts)


def test_reassigning_a_host_that_is_not_in_the_shares_is_refused() -> None:
    with pytest.raises(SharesError, match="'z' is not a host"):
        reassign(share([Launch("a", 1)], ["h"]), "z", set())
