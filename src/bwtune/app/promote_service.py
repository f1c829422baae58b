"""Bringing a config into service on a hardware group's hosts, one host at a time, with
rollback: what `bwtune promote` (a run's config) and `bwtune recipe apply` (a recipe's) share.

`gather_facts` runs the facts playbook (read only) so the caller can pick the hosts of its
config's hardware group; `roll_out` runs playbooks/promote.yml on those hosts (`serial: 1`:
the server role installs the config, the host must answer /health_generate and the sweep's
correctness prompts, then the next host starts; a host that fails goes back to the config it
ran before, or, with none before, gets what the promotion made removed again, and the rollout
stops). With `check`, Ansible's check mode: per host what it would write, nothing written.

The commands choose the config, refuse what may not be served (a simulated result on a host
that is not simulated) and print; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bwtune import ansible_run
from bwtune.app import facts_service

PROMOTE_PLAYBOOK = "promote.yml"
FACTS_PLAYBOOK = facts_service.FACTS_PLAYBOOK
RESOLVE_TASK = "Resolve the config to serve"
PROMOTED_TASK = "Promoted"
CHECK_TASK = "Would change"  # check mode: the server role's server_changes
STOP_TASK = "Stop the rollout"
ROLLED_BACK = "rolled back to "  # the words of STOP_TASK's message after a rollback

CHANGES_TASK = "Say what this run changes"  # the server role's server_changes (set_fact)

# What `on_progress` is told, per host, as the rollout goes.
RESOLVED, WOULD, PROMOTED = "resolved", "would", "promoted"


@dataclass
class HostOutcome:
    status: str = "not reached"  # promoted | rolled back | failed | not reached | left out
    # --check: would change | unchanged (| failed | not reached | left out)
    changed_flags: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    would: dict[str, Any] | None = None  # --check: the server role's server_changes
    # The server role's own account (its server_changes): the files it wrote, what it created.
    # A host that serves the config already: none (`changed` False).
    writes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.writes)


@dataclass
class PlaybookOptions:
    """What both playbooks run with: the forks, -v and the checked -e words."""

    forks: int | None = None
    verbosity: int = 0
    extra_args: list[str] = field(default_factory=list)


@dataclass
class FactsRun:
    facts: dict[str, dict[str, Any]]
    failed: dict[str, str]  # host -> the failure's line
    error: str | None = None  # the playbook did not run
    canceled: bool = False


def gather_facts(inventory: ansible_run.Inventory, limit: str | None, options: PlaybookOptions) -> FactsRun:
    """The hosts' facts now (read only), as `bwtune facts` gathers them."""
    with ansible_run.cancel_on_interrupt() as cancel:
        gathered = ansible_run.run_playbook(
            FACTS_PLAYBOOK, inventory, {}, limit=limit, forks=options.forks, quiet=True,
            verbosity=options.verbosity, extra_args=list(options.extra_args), cancel=cancel.event,
        )  # fmt: skip
    if gathered.canceled or gathered.error:
        return FactsRun({}, {}, gathered.error, gathered.canceled)
    failed = {host: failure.line() for host, failure in gathered.failures.items()}
    return FactsRun(facts_service.host_facts(gathered), failed)


def promotion(args: Sequence[str], config_id: str, run_id: str) -> dict[str, Any]:
    """promote.yml's `promote_config`: SGLang's arguments and what config.json records."""
    return {"args": [str(word) for word in args], "config_id": config_id, "run_id": run_id}


@dataclass
class Rollout:
    inventory: ansible_run.Inventory
    hosts: list[str]  # the hardware group's hosts, inventory order
    promotion: dict[str, Any]
    check: bool = False
    options: PlaybookOptions = field(default_factory=PlaybookOptions)


@dataclass
class RolloutResult:
    outcomes: dict[str, HostOutcome]  # every host of the rollout
    error: str | None = None  # the playbook did not run
    canceled: bool = False
    failed: bool = False  # a host failed, or the playbook's rc was not 0


def roll_out(
    request: Rollout, on_progress: Callable[[str, str, HostOutcome], None] | None = None
) -> RolloutResult:
    """promote.yml on the rollout's hosts; `on_progress(host, RESOLVED|WOULD|PROMOTED, outcome)`
    as each host gets there."""
    outcomes = {host: HostOutcome() for host in request.hosts}
    seen_resolve: set[str] = set()
    seen_changes: set[str] = set()
    # The last failure of each host: a rescued one (the promotion) comes before STOP_TASK's.
    last_failure: dict[str, tuple[str | None, str]] = {}

    def tell(host: str, stage: str) -> None:
        if on_progress is not None:
            on_progress(host, stage, outcomes[host])

    def on_event(event: ansible_run.RunnerEvent) -> None:
        host = event.host
        if host is None or host not in outcomes:
            return
        if event.kind == "failed":
            last_failure[host] = (event.task, str(event.res.get("msg") or "failed"))
        if event.kind != "ok":
            return
        if event.task == CHANGES_TASK and host not in seen_changes:  # the promotion's, not a rollback's
            seen_changes.add(host)
            found = (event.res.get("ansible_facts") or {}).get("server_changes") or {}
            outcomes[host].writes = [
                str(w) for w in [*(found.get("writes") or []), *(found.get("creates") or [])]
            ]
        if event.task == RESOLVE_TASK and host not in seen_resolve:  # the promotion's; a rollback's is second
            seen_resolve.add(host)
            outcomes[host].changed_flags = list(event.res.get("changed_flags") or [])
            tell(host, RESOLVED)
        elif event.task == CHECK_TASK and request.check:
            would = event.res.get("msg")
            outcomes[host].would = would if isinstance(would, dict) else {}
        elif event.task == PROMOTED_TASK and request.check:
            would = outcomes[host].would or {}
            outcomes[host].status = (
                "would change" if would.get("writes") or would.get("creates") else "unchanged"
            )
            tell(host, WOULD)
        elif event.task == PROMOTED_TASK:
            outcomes[host].status = "promoted"
            tell(host, PROMOTED)

    options = request.options
    with ansible_run.cancel_on_interrupt() as cancel:
        outcome = ansible_run.run_playbook(
            PROMOTE_PLAYBOOK,
            request.inventory,
            {"promote_config": request.promotion},
            # Ansible's --limit, narrowed to the group: the hosts are inventory names.
            limit=",".join(request.hosts),
            on_event=on_event,
            cancel=cancel.event,
            forks=options.forks,
            quiet=True,
            verbosity=options.verbosity,
            extra_args=[*options.extra_args, *(["--check"] if request.check else [])],
        )
    if outcome.canceled:
        return RolloutResult(outcomes, canceled=True)
    for host, failure in outcome.failures.items():
        result = outcomes.setdefault(host, HostOutcome())
        task, message = last_failure.get(host, (failure.task, failure.message))
        rolled_back = task == STOP_TASK and ROLLED_BACK in message
        result.status = "rolled back" if rolled_back else "failed"
        result.message = message
    return RolloutResult(outcomes, outcome.error, failed=bool(outcome.failures) or outcome.rc != 0)


def describe_changes(changes: Sequence[Mapping[str, Any]]) -> str:
    """`--flag old -> new; ...` (or `no flag changes`)."""
    if not changes:
        return "no flag changes"
    words = []
    for change in changes:
        old = "unset" if change["old"] is None else change["old"]
        new = "unset" if change["new"] is None else change["new"]
        words.append(f"--{change['flag']} {old} -> {new}")
    return "; ".join(words)


def describe_would(host: str, result: HostOutcome) -> str:
    """--check: what the host would get, in a few lines."""
    would = result.would or {}
    if result.status == "unchanged":
        return f"{host}: no change (serves this config already)"
    lines = [f"{host}: would change {describe_changes(result.changed_flags)}"]
    lines.append(f"  unit {would.get('unit')}: ExecStart={would.get('exec_start')}")
    for word, key in (("write", "writes"), ("create", "creates")):
        if would.get(key):
            lines.append(f"  would {word}: {', '.join(str(w) for w in would[key])}")
    return "\n".join(lines)


def failure_lines(outcomes: Mapping[str, HostOutcome]) -> list[str]:
    """`host H STATUS: why` for each host that was not promoted (first line of why only: the
    journal tail that follows is in --json and -v output)."""
    lines = []
    for host, result in sorted(outcomes.items()):
        if result.status in ("promoted", "would change", "unchanged"):
            continue
        first = result.message.splitlines()[0] if result.message else ""
        lines.append(f"host {host} {result.status}" + (f": {first}" if first else ""))
    return lines
