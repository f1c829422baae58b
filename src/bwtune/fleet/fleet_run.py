"""A fleet sweep's state: which host of each hardware group runs which launch, kept on disk.

`bwtune sweep` with a strategy whose launches are fixed up front (`grid`) on more than one
host first plans on every host (the sweep playbook in check mode: the node's own plan and
its facts), groups the hosts by hardware group (`HardwareGroup.key()` of their facts, and
the plan each planned: hosts whose plans differ are never shared alike), prices each
launch (`costs.estimate_costs`, from measured launches of *other* runs: a resume prices
alike) and shares each group's launches among its hosts (`shares.share`, LPT). Each round
every host with launches left runs them (`sweep_only_configs` through the role's
`sweep_fleet_shares`); after a round a host with launches of its share unfinished is lost:
they go to the group's other hosts (`shares.reassign`), a finished launch never moves, and a
lost host is never given a launch again, even when it comes back.

The state is written (atomically, fsync'd) to `runs/<run id>/fleet.json` before the first
round and after each change, so a resumed controller (`bwtune sweep --resume RUN`) goes on
from the same shares. `merge` decides which host's lines of a config are kept: each
config's lines come from one host only, so the merge counts each config once.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune.analysis.hardware_group import HardwareGroup
from bwtune.fleet import costs, shares

STATE_FILE = "fleet.json"
VERSION = 1
# Strategies whose launches are the plan's whatever the launches before measured: the ones a
# fleet can share out up front (the sweep module's only_configs takes these only).
FIXED_LAUNCH_STRATEGIES = ("grid",)


class FleetError(ValueError):
    """A fleet sweep that cannot be set up or resumed: one line naming the value."""


def applies(strategy: str, hosts: Sequence[str]) -> bool:
    """A fleet sweep: a strategy with fixed launches on more than one host."""
    return strategy in FIXED_LAUNCH_STRATEGIES and len(hosts) > 1


@dataclass
class Group:
    """One hardware group of the run: its hosts, its plan's launches and their shares."""

    key: str
    hosts: list[str]
    launches: list[str]  # the plan's launches, in the plan's order
    by_host: dict[str, list[str]]
    costs: dict[str, float]
    lost: list[str] = field(default_factory=list)
    cost_sources: dict[str, int] = field(default_factory=dict)  # costs.CONFIG/AXES/PLAN -> launches

    def current(self) -> shares.Shares:
        return shares.Shares(
            {host: tuple(self.by_host[host]) for host in self.hosts},
            dict(self.costs),
            frozenset(self.lost),
        )

    def take(self, given: shares.Shares) -> None:
        self.by_host = {host: list(given.by_host[host]) for host in self.hosts}
        self.lost = sorted(given.lost)


@dataclass
class FleetState:
    run_id: str
    groups: list[Group]
    reassigned: list[dict[str, Any]] = field(default_factory=list)  # one entry per reassignment
    rounds: int = 0

    # ------------------------------------------------------------------ reading

    def group_of(self, host: str) -> Group:
        for group in self.groups:
            if host in group.hosts:
                return group
        raise KeyError(host)

    def hosts(self) -> list[str]:
        return sorted(host for group in self.groups for host in group.hosts)

    def share_of(self, host: str) -> list[str]:
        return list(self.group_of(host).by_host[host])

    def lost(self) -> list[str]:
        return sorted(host for group in self.groups for host in group.lost)

    def todo(self, done: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
        """host -> the launches of its share it has not finished (hosts with some, not lost)."""
        left = {}
        for group in self.groups:
            for host in group.hosts:
                if host in group.lost:
                    continue
                finished = set(done.get(host) or ())
                ids = [i for i in group.by_host[host] if i not in finished]
                if ids:
                    left[host] = ids
        return left

    # ------------------------------------------------------------------ changing

    def lose(self, host: str, done: Iterable[str], why: str) -> dict[str, Any]:
        """`host`'s unfinished launches to its group's other hosts (shares.reassign); the
        entry says what went where. SharesError when it was the group's last host."""
        group = self.group_of(host)
        before = group.current()
        finished = set(done)
        orphans = [i for i in before.by_host[host] if i not in finished]
        after = shares.reassign(before, host, finished)
        group.take(after)
        moved = {
            other: [i for i in after.by_host[other] if i in orphans]
            for other in group.hosts
            if other != host and any(i in orphans for i in after.by_host[other])
        }
        entry = {"round": self.rounds, "host": host, "why": why, "to": moved}
        self.reassigned.append(entry)
        return entry

    # ------------------------------------------------------------------ on disk

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "run_id": self.run_id,
            "rounds": self.rounds,
            "groups": [
                {
                    "key": g.key,
                    "hosts": g.hosts,
                    "launches": g.launches,
                    "by_host": g.by_host,
                    "costs": g.costs,
                    "lost": g.lost,
                    "cost_sources": g.cost_sources,
                }
                for g in self.groups
            ],
            "reassigned": self.reassigned,
        }

    def save(self, run_dir: Path) -> Path:
        """Write the state atomically (temporary file, fsync, rename): a killed controller
        leaves the old state or the new one, never half of one."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / STATE_FILE
        fd, tmp = tempfile.mkstemp(prefix=".fleet.", dir=run_dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(self.as_dict(), out, indent=1)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, run_dir: Path) -> FleetState | None:
        path = run_dir / STATE_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            groups = [
                Group(
                    key=str(g["key"]),
                    hosts=[str(h) for h in g["hosts"]],
                    launches=[str(i) for i in g["launches"]],
                    by_host={str(h): [str(i) for i in ids] for h, ids in g["by_host"].items()},
                    costs={str(i): float(c) for i, c in g["costs"].items()},
                    lost=[str(h) for h in g.get("lost") or []],
                    cost_sources={str(k): int(v) for k, v in (g.get("cost_sources") or {}).items()},
                )
                for g in data["groups"]
            ]
            if data.get("version") != VERSION:
                raise ValueError(f"version {data.get('version')!r}, expected {VERSION}")
            return cls(
                str(data["run_id"]), groups, list(data.get("reassigned") or []), int(data.get("rounds") or 0)
            )
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise FleetError(
                f"{path}: not a fleet sweep's state ({err}); it was written by another bwtune"
            ) from None


# ---------------------------------------------------------------------- building one


def node_group(facts: Mapping[str, Any], the_plan: Mapping[str, Any]) -> str:
    """The key hosts are shared alike by: the hardware group of the host's facts, and the
    plan it made (its launches: a host that planned otherwise is never another's stand-in)."""
    launches = [str(launch["config"]) for launch in the_plan.get("launches") or []]
    digest = hashlib.sha256("\n".join(launches).encode()).hexdigest()[:10]
    return f"{HardwareGroup.of_facts(facts).key()}|plan {digest}"


def build(
    run_id: str,
    plans: Mapping[str, Mapping[str, Any]],
    facts: Mapping[str, Mapping[str, Any]],
    lines_of: Any,
) -> FleetState:
    """The shares of every group: `plans` host -> the node's plan (its `plan` in check mode),
    `facts` host -> its gathered facts, `lines_of(group, plan)` the measured launches to
    price the group's launches by (costs.group_lines of other runs)."""
    members: dict[str, list[str]] = {}
    for host in sorted(plans):
        members.setdefault(node_group(facts.get(host) or {}, plans[host]), []).append(host)
    groups = []
    for key, hosts in sorted(members.items()):
        the_plan = plans[hosts[0]]
        launches = list(the_plan.get("launches") or [])
        points = {str(c["id"]): dict(c.get("point") or {}) for c in the_plan.get("configs") or []}
        estimate = (the_plan.get("summary") or {}).get("estimate") or {}
        startup = float(estimate.get("startup_s") or 0.0)
        per_launch = float(estimate.get("per_launch_s") or startup)
        group = HardwareGroup.of_facts(facts.get(hosts[0]) or {})
        found = costs.estimate_costs(
            launches,
            points,
            lines_of(group, the_plan),
            plan_startup_s=startup,
            plan_workload_s=max(per_launch - startup, 0.0),
        )
        shared = shares.share(costs.as_launches(launches, found), hosts)
        sources: dict[str, int] = {}
        for est in found.values():
            sources[est.source] = sources.get(est.source, 0) + 1
        groups.append(
            Group(
                key=key,
                hosts=hosts,
                launches=[str(launch["config"]) for launch in launches],
                by_host={host: list(shared.by_host[host]) for host in hosts},
                costs=dict(shared.costs),
                cost_sources=sources,
            )
        )
    return FleetState(run_id, groups)


# ---------------------------------------------------------------------- merging


def launched_ids(lines: Iterable[Mapping[str, Any]]) -> set[str]:
    """The configs these lines launched (any status but pruned and duplicate)."""
    return {
        str(line.get("config_id"))
        for line in lines
        if isinstance(line, Mapping) and contract.is_launched(line.get("status"))
    }


def merge(
    state: FleetState,
    lines_by_host: Mapping[str, Sequence[Mapping[str, Any]]],
    stored: Mapping[str, Iterable[str]],
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """host -> the lines of it to keep, and one message per host's config left out.

    Within a group, each config's lines come from one host: the one the results database
    already keeps for this run (`stored`, host -> its configs), else the host whose share
    holds it now (a launch never moves once finished, so that is where it was measured),
    else the first host by name that has one. Pruned and duplicate lines (every host of a
    group writes the same) are kept from one host per group in the same way. A host that
    was lost and came back with a line of a launch given to another host is said, and its
    line is not kept. Hosts outside the state's groups keep every line."""
    kept_before = {host: set(configs) for host, configs in stored.items()}
    owner: dict[tuple[str, str], str] = {}  # (host, config) -> the host whose lines are kept
    for group in state.groups:
        holders: dict[str, list[str]] = {}
        for host in group.hosts:
            for line in lines_by_host.get(host) or []:
                holders.setdefault(str(line.get("config_id")), []).append(host)
        for config, hosts in holders.items():
            before = [h for h in group.hosts if config in kept_before.get(h, ())]
            sharer = next((h for h in group.hosts if config in group.by_host[h]), None)
            if before:
                chosen = before[0]
            elif sharer in hosts:
                chosen = str(sharer)
            else:
                chosen = sorted(hosts)[0]
            for host in hosts:
                owner[(host, config)] = chosen
    kept: dict[str, list[dict[str, Any]]] = {}
    dropped: dict[tuple[str, str], str] = {}
    for host, lines in lines_by_host.items():
        for line in lines:
            config = str(line.get("config_id"))
            chosen = owner.get((host, config), host)
            if chosen == host:
                kept.setdefault(host, []).append(dict(line))
            elif contract.is_launched(line.get("status")):
                dropped[(host, config)] = chosen
    messages = [
        f"host {host} also measured {config}, which {other} measured: its line is not kept "
        f"(each config is counted once)"
        for (host, config), other in sorted(dropped.items())
    ]
    return kept, messages


def progress_rows(
    state: FleetState, lines_by_host: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """Per group and host: its share, done, failed, queued (not finished), lost."""
    rows = []
    for group in state.groups:
        for host in group.hosts:
            share = group.by_host[host]
            latest = {
                str(line.get("config_id")): line
                for line in lines_by_host.get(host) or []
                if contract.is_launched(line.get("status")) and str(line.get("config_id")) in share
            }
            rows.append(
                {
                    "group": group.key,
                    "host": host,
                    "assigned": len(share),
                    "done": len(latest),
                    "failed": sum(1 for line in latest.values() if line.get("status") != contract.OK),
                    "queued": len([i for i in share if i not in latest]),
                    "lost": host in group.lost,
                }
            )
    return rows
