"""What a playbook run produced, read from ansible-runner's event stream.

`runner_on_ok` results, per-host failures, `runner_retry` progress, `playbook_on_stats` and
its `set_stats` artifact data: never the fact cache, whose format changed under
ansible-core 2.19.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_EVENT_KINDS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_retry": "retry",
    "runner_on_skipped": "skipped",
    "runner_item_on_failed": "item_failed",
    "playbook_on_task_start": "task_start",
    "playbook_on_play_start": "play_start",
    "playbook_on_stats": "stats",
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOOP_FAILED = "One or more items failed"


@dataclass(frozen=True)
class RunnerEvent:
    """One event of interest from the playbook, reduced to what bwtune reads."""

    kind: str  # ok | failed | unreachable | retry | skipped | task_start | play_start | stats
    host: str | None
    task: str | None
    action: str | None  # the module's FQCN as resolved by Ansible
    res: dict[str, Any]
    data: dict[str, Any]  # the raw event_data


@dataclass(frozen=True)
class HostFailure:
    host: str
    kind: str  # failed | unreachable
    task: str | None
    message: str

    def line(self) -> str:
        where = f" in task {self.task!r}" if self.task else ""
        what = "is unreachable" if self.kind == "unreachable" else "failed"
        return f"host {self.host} {what}{where}: {self.message}"


@dataclass
class PlaybookRun:
    """The outcome of one playbook run, built from its events."""

    playbook: Path
    private_data_dir: Path
    ident: str
    rc: int = -1
    status: str = "unstarted"  # successful | failed | canceled | timeout
    ok: list[RunnerEvent] = field(default_factory=list)
    failures: dict[str, HostFailure] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    artifact_data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # why ansible-playbook stopped before any host ran, if it did

    @property
    def canceled(self) -> bool:
        return self.status == "canceled"

    @property
    def artifact_dir(self) -> Path:
        return self.private_data_dir / "artifacts" / self.ident

    @property
    def hosts(self) -> list[str]:
        """Hosts the play reached (from the final stats)."""
        seen: set[str] = set()
        for key in ("ok", "failures", "dark", "skipped", "changed", "processed"):
            seen.update(self.stats.get(key) or {})
        return sorted(seen)

    def results(self, action: str, task: str | None = None) -> dict[str, dict[str, Any]]:
        """host -> `res` of the last successful run of module `action` (FQCN or short name)."""
        found: dict[str, dict[str, Any]] = {}
        for event in self.ok:
            if event.host and _same_action(event.action, action) and (task is None or event.task == task):
                found[event.host] = event.res
        return found

    def stdout_tail(self, lines: int = 20) -> list[str]:
        try:
            text = (self.artifact_dir / "stdout").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return [ANSI.sub("", line) for line in text.splitlines()[-lines:]]


def reduce(event: dict[str, Any]) -> RunnerEvent | None:
    """ansible-runner's event as a RunnerEvent, or None for a kind bwtune does not read."""
    kind = _EVENT_KINDS.get(str(event.get("event")))
    if kind is None:
        return None
    data = event.get("event_data") or {}
    res = data.get("res")
    return RunnerEvent(
        kind=kind,
        host=data.get("host"),
        task=data.get("task"),
        action=data.get("resolved_action") or data.get("task_action"),
        res=res if isinstance(res, dict) else {},
        data=data,
    )


def record(outcome: PlaybookRun, event: RunnerEvent) -> None:
    """Add what `event` says to the run's outcome."""
    if event.kind == "ok":
        outcome.ok.append(event)
    elif event.kind in ("failed", "unreachable") and event.host:
        if event.data.get("ignore_errors"):
            return
        message = failure_message(event.res)
        outcome.failures.setdefault(event.host, HostFailure(event.host, event.kind, event.task, message))
    elif event.kind == "stats":
        outcome.stats = event.data
        outcome.artifact_data = dict(event.data.get("artifact_data") or {})


def failure_message(res: Mapping[str, Any], limit: int = 300) -> str:
    """One line. A long message (a command's whole output, as pip's "stdout: ... :stderr:
    ...") says why it failed at its end ("[Errno 28] No space left on device"): keep its
    start and that tail, not the start alone."""
    message = str(res.get("msg") or res.get("stderr") or res.get("reason") or "no message")
    item = _failed_item(res)
    if item is not None and message.strip() == _LOOP_FAILED:
        # A loop's own message says nothing; its first failed item says why ("'x' is undefined").
        message = f"{item[0]}: {item[1]}"
    text = " ".join(message.split())
    if len(text) <= limit:
        return text
    lines = [" ".join(line.split()) for line in message.splitlines() if line.strip()]
    budget, tail = limit - 100, list[str]()
    for line in reversed(lines):
        if tail and sum(len(t) + 3 for t in tail) + len(line) > budget:
            break
        tail.insert(0, line[-budget:])  # only the last line can be cut: "[...]" marks it
    return f"{text[:90]} [...] {' | '.join(tail)}"


def _failed_item(res: Mapping[str, Any]) -> tuple[str, str] | None:
    """(item label, message) of a loop result's first failed item, or None."""
    results = res.get("results")
    if not isinstance(results, list):
        return None
    for entry in results:
        if isinstance(entry, Mapping) and entry.get("failed"):
            label = entry.get("_ansible_item_label", entry.get("item", "item"))
            inner = entry.get("msg") or entry.get("stderr") or "failed"
            return str(label)[:80], str(inner)
    return None


def _same_action(resolved: str | None, wanted: str) -> bool:
    """`wanted` as a FQCN must match exactly; a short name matches any collection's."""
    if not resolved:
        return False
    if "." in wanted:
        return resolved == wanted
    return resolved.rsplit(".", 1)[-1] == wanted


def first_error(lines: list[str]) -> str | None:
    """ansible-playbook's own error (a playbook that did not start), from its output."""
    for index, line in enumerate(lines):
        if line.startswith("[ERROR]:") or line.startswith("ERROR!"):
            text = line.split(":", 1)[1] if line.startswith("[ERROR]") else line[len("ERROR!") :]
            extra = lines[index + 1].strip() if index + 1 < len(lines) else ""
            if extra.startswith("Origin:"):
                text = f"{text.strip()} ({extra})"
            return text.strip()
    return None
