"""Which host of a hardware group runs which launch of the group's plan.

`share` gives each launch to exactly one host, balanced by estimated cost: longest
processing time first (the costliest launch to the least loaded host). Greedy list
scheduling keeps every host's load within the mean load plus the costliest single launch.
Ties are broken by launch id and by host name, never by input order or a hash: a resumed
controller that recomputes the shares from the same plan, costs and hosts gets the same
shares, whatever order the inventory or the plan listed them in.

`reassign` takes a lost host's unfinished launches and shares them among the group's other
hosts by the same rule, on top of what each still has to run. A finished launch never
moves: its result is in its host's results file, and running it again elsewhere would
measure it twice. Every function returns a new Shares; none changes its input.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass


class SharesError(ValueError):
    """Input that cannot be shared out: one line naming the value."""


@dataclass(frozen=True)
class Launch:
    id: str
    cost_s: float  # estimated seconds (bwtune.fleet.costs)


@dataclass(frozen=True)
class Shares:
    """host -> the ids of its launches (in the plan's order), and each launch's cost."""

    by_host: Mapping[str, tuple[str, ...]]
    costs: Mapping[str, float]
    lost: frozenset[str] = frozenset()  # hosts reassigned away from: never given a launch again

    def host_of(self, launch_id: str) -> str:
        for host, ids in self.by_host.items():
            if launch_id in ids:
                return host
        raise KeyError(launch_id)

    def load_s(self, host: str, done: Collection[str] = ()) -> float:
        """The estimated seconds of the host's launches (those not in `done`)."""
        return sum(self.costs[i] for i in self.by_host[host] if i not in done)


def share(launches: Sequence[Launch], hosts: Sequence[str]) -> Shares:
    """Every launch to exactly one of `hosts`, balanced by cost (see the module doc)."""
    _check_hosts(hosts)
    costs = _check_launches(launches)
    order = {launch.id: n for n, launch in enumerate(launches)}
    given = _greedy(costs, list(costs), {host: 0.0 for host in hosts})
    return Shares(_in_plan_order(given, order, hosts), costs)


def reassign(shares: Shares, lost_host: str, done_ids: Collection[str]) -> Shares:
    """`lost_host`'s launches not in `done_ids` go to the other hosts, balanced on what each
    still has to run; the lost host keeps only its finished launches, and nothing finished
    (on any host) moves."""
    if lost_host not in shares.by_host:
        raise SharesError(f"reassign: {lost_host!r} is not a host of these shares")
    lost = shares.lost | {lost_host}
    others = [host for host in shares.by_host if host not in lost]
    orphans = [i for i in shares.by_host[lost_host] if i not in done_ids]
    if orphans and not others:
        raise SharesError(
            f"reassign: {lost_host!r} was the group's last host; "
            f"{len(orphans)} launches have no host to go to"
        )
    order = {launch_id: n for n, launch_id in enumerate(_all_ids(shares))}
    left = {host: shares.load_s(host, done_ids) for host in others}
    given = _greedy(shares.costs, orphans, left)
    by_host = {host: list(ids) for host, ids in shares.by_host.items()}
    by_host[lost_host] = [i for i in by_host[lost_host] if i in done_ids]
    for host, ids in given.items():
        by_host[host].extend(ids)
    return Shares(_in_plan_order(by_host, order, list(shares.by_host)), shares.costs, frozenset(lost))


def _greedy(
    costs: Mapping[str, float], ids: Sequence[str], loads: Mapping[str, float]
) -> dict[str, list[str]]:
    """LPT: costliest first (ties by id), each to the least loaded host (ties by name)."""
    heap = [(load, host) for host, load in loads.items()]
    heapq.heapify(heap)
    given: dict[str, list[str]] = {host: [] for host in loads}
    for launch_id in sorted(ids, key=lambda i: (-costs[i], i)):
        load, host = heapq.heappop(heap)
        given[host].append(launch_id)
        heapq.heappush(heap, (load + costs[launch_id], host))
    return given


def _in_plan_order(
    given: Mapping[str, Sequence[str]], order: Mapping[str, int], hosts: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    return {host: tuple(sorted(given.get(host, ()), key=order.__getitem__)) for host in hosts}


def _all_ids(shares: Shares) -> list[str]:
    # The costs mapping keeps the plan's order (share built it from the launches in order).
    return list(shares.costs)


def _check_hosts(hosts: Sequence[str]) -> None:
    if not hosts:
        raise SharesError("share: the group has no hosts")
    for host in hosts:
        if not isinstance(host, str) or not host:
            raise SharesError(f"share: host name {host!r} is not a name")
    if len(set(hosts)) != len(hosts):
        twice = sorted({h for h in hosts if list(hosts).count(h) > 1})
        raise SharesError(f"share: host {twice[0]!r} is named twice")


def _check_launches(launches: Sequence[Launch]) -> dict[str, float]:
    costs: dict[str, float] = {}
    for launch in launches:
        if launch.id in costs:
            raise SharesError(f"share: launch {launch.id!r} is listed twice")
        cost = launch.cost_s
        if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost) or cost < 0:
            raise SharesError(f"share: launch {launch.id!r} has cost {cost!r}; a cost is seconds, 0 or more")
        costs[launch.id] = float(cost)
    return costs
