"""What a user watches while playbooks run: a live table on a terminal, lines otherwise.

Both views read the same `SweepState`, which folds runner events into per-host progress:
the sweep's "Follow the sweep" task retries every few seconds and each retry carries
`res.progress`, the progress file's view (module_utils/_contracts/progress_fields: VIEW, its `current`
keyed CURRENT); a HostProgress keeps its LIVE fields, read by `progress_fields.live_values`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import node_outcome, progress_fields
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_contract import NOT_LAUNCHED
from bwtune.ansible_run import RunnerEvent

SWEEP_PROGRESS_ACTION = "sweep_progress"
# The task of roles/sweep and playbooks/sweep_attach.yml whose retries and result the CLI
# reads: those files hold it as a literal, tests/unit/cli/test_follow_task.py holds them to this.
FOLLOW_TASK = "Follow the sweep"


# What a HostProgress keeps besides the progress file's LIVE fields (progress_fields): the
# controller's own state, from events and the finished outcome. Its attributes are these and
# LIVE, nothing else (tests/unit/sweep/test_progress_fields.py).
OWN_FIELDS = ("host", "simulated", "task", "finished", "failure", "left_out")


@dataclass
class HostProgress:
    host: str
    simulated: bool = False
    task: str | None = None  # the playbook task the host is in, until the sweep reports
    # The progress file's LIVE fields (progress_fields.LIVE), as the module's view carries them.
    planned: int | None = None
    done: int = 0
    failed: int = 0
    current: dict[str, Any] | None = None
    eta_s: float | None = None
    finished: bool = False
    failure: str | None = None  # unreachable or failed, with the reason
    left_out: int = 0  # launches the strategy chose not to make (a finished adaptive run)

    def phase_text(self) -> str:
        if self.failure:
            return self.failure
        if self.finished:
            return f"finished ({self.left_out} left out by the strategy)" if self.left_out else "finished"
        if not self.current:
            return self.task or "waiting"
        phase = str(self.current.get("phase") or "")
        if phase == "workload" and self.current.get("workloads"):
            phase = f"workload {self.current.get('workload')}/{self.current.get('workloads')}"
        return f"{self.current.get('config', '?')} {phase}".strip()

    def counts_text(self) -> str:
        planned = "?" if self.planned is None else str(self.planned)
        return f"{self.done}/{planned}"

    def running(self) -> int:
        """Launches in flight now: 0 or 1 (a node runs one server at a time)."""
        return 1 if self.current and not self.finished else 0

    def queued(self) -> int | None:
        """Launches planned that are neither done nor running (None before the plan is known);
        a lost or failed host's queue is what it did not finish."""
        if self.planned is None:
            return None
        return max(self.planned - self.done - self.running(), 0)


@dataclass
class SweepState:
    """Per-host progress, updated from events; `update` says what changed, as a line."""

    hosts: dict[str, HostProgress] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    ctrl_c: str = "Ctrl-C cancels (the node stops its server)"  # what Ctrl-C does here
    # A fleet sweep (docs/fleet.md): each host's line says its queue too (its share not yet run).
    fleet: bool = False

    @classmethod
    def for_hosts(cls, simulated: dict[str, bool]) -> SweepState:
        return cls({host: HostProgress(host, simulated=flag) for host, flag in sorted(simulated.items())})

    def host(self, name: str) -> HostProgress:
        if name not in self.hosts:
            self.hosts[name] = HostProgress(name)
        return self.hosts[name]

    def update(self, event: RunnerEvent) -> str | None:
        if event.kind == "task_start":
            for progress in self.hosts.values():
                if not progress.failure and not progress.current and not progress.finished:
                    progress.task = event.task
            return None
        if not event.host:
            return None
        progress = self.host(event.host)
        if event.kind in ("failed", "unreachable"):
            if event.data.get("ignore_errors"):
                return None
            reason = str(event.res.get("msg") or "no message").splitlines()[0]
            progress.failure = ("unreachable: " if event.kind == "unreachable" else "failed: ") + reason
            return f"{event.host}: {progress.failure}"
        is_progress = event.action and event.action.rsplit(".", 1)[-1] == SWEEP_PROGRESS_ACTION
        if event.kind not in ("retry", "ok") or not is_progress:
            return None
        before = self.line(progress)
        report = event.res.get("progress")
        if isinstance(report, dict):
            self._apply(progress, report)
        result = event.res.get("result")
        if event.kind == "ok":
            progress.finished = True
            progress.current = None
            if isinstance(result, dict):
                self._apply_result(progress, result)
                if node_outcome.error(result):  # the why is printed once, at the end
                    progress.failure = "failed: the sweep did not finish"
        after = self.line(progress)
        return after if after != before else None

    @staticmethod
    def _apply(progress: HostProgress, report: dict[str, Any]) -> None:
        for name, value in progress_fields.live_values(report).items():
            setattr(progress, name, value)

    @staticmethod
    def _apply_result(progress: HostProgress, result: dict[str, Any]) -> None:
        lines = [line for line in node_outcome.lines(result) if isinstance(line, dict)]
        progress.simulated = progress.simulated or any(line.get("simulated") for line in lines)
        # Pruned and duplicate configs are recorded but never launched: not in `planned`.
        launched = [line for line in lines if line.get("status") not in NOT_LAUNCHED]
        if lines:
            progress.done = len(launched)
            progress.failed = sum(line.get("status") != "ok" for line in launched)
            progress.planned = max(progress.planned or 0, len(launched))
        left_out = node_outcome.summary_of(result).get("left_out")
        if isinstance(left_out, list) and not node_outcome.error(result):
            # A finished run did every launch its strategy chose: the rest were left out, not
            # still to do ("2/6 done" read as unfinished).
            progress.planned = progress.done
            progress.left_out = len(left_out)

    def line(self, progress: HostProgress) -> str:
        parts = [f"{progress.host}:", f"{progress.counts_text()} done", f"{progress.failed} failed"]
        queued = progress.queued()
        if self.fleet and queued is not None:
            parts += [f"{progress.running()} running", f"{queued} queued"]
        parts.append(progress.phase_text())
        if progress.eta_s is not None and not progress.finished:
            parts.append(f"ETA {format_duration(progress.eta_s)}")
        if progress.simulated:
            parts.append("(simulated)")
        return "  ".join(parts)

    def table(self, title: str) -> Table:
        table = Table(title=title, title_justify="left", expand=False)
        for column in ("host", "done/planned", "failed", "queued", "in flight", "ETA", ""):
            table.add_column(column)
        for progress in self.hosts.values():
            eta = "" if progress.eta_s is None or progress.finished else format_duration(progress.eta_s)
            queued = progress.queued()
            table.add_row(
                progress.host,
                progress.counts_text(),
                str(progress.failed),
                "" if queued is None else str(queued),
                progress.phase_text(),
                eta,
                "simulated" if progress.simulated else "",
                style="red" if progress.failure else None,
            )
        elapsed = format_duration(time.monotonic() - self.started)
        table.caption = f"elapsed {elapsed}  ·  {self.ctrl_c}"
        return table


class ProgressView:
    """Shows a SweepState: rich Live on a terminal, one line per change otherwise."""

    def __init__(
        self,
        state: SweepState,
        title: str,
        stream: TextIO | None = None,
        quiet: bool = False,
        live: bool | None = None,
    ) -> None:
        self.state = state
        self.title = title
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        use_live = self.stream.isatty() if live is None else live
        self._live: Live | None = None
        if use_live and not quiet:
            console = Console(file=self.stream)
            self._live = Live(state.table(title), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> ProgressView:
        if self._live is not None:
            self._live.__enter__()
        elif not self.quiet:
            self._print(f"{self.title}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self.state.table(self.title))
            self._live.__exit__(None, None, None)

    def on_event(self, event: RunnerEvent) -> None:
        line = self.state.update(event)
        if self._live is not None:
            self._live.update(self.state.table(self.title))
        elif line and not self.quiet:
            self._print(line)

    def note(self, text: str) -> None:
        """A message outside the table (cancelling, resuming), shown in both modes."""
        if self._live is not None:
            self._live.console.print(text)
        else:
            self._print(text)

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


class TaskLines:
    """Plain progress for short playbooks (facts, provision): one line per host and task."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet

    def on_event(self, event: RunnerEvent) -> None:
        if not event.host or event.kind not in ("ok", "failed", "unreachable"):
            return
        if event.data.get("ignore_errors") and event.kind == "failed":
            return
        if not self.quiet:
            status = event.kind if event.kind != "ok" else ("changed" if event.res.get("changed") else "ok")
            line = f"{event.host}: {event.task}: {status}"
            if event.kind != "ok":
                line += f": {str(event.res.get('msg') or '').splitlines()[0] if event.res.get('msg') else ''}"
            print(line.rstrip(": "), file=self.stream, flush=True)
        # A module's warnings (a risk the user accepted, such as preflight_accept_glibc_risk)
        # are not progress: shown with --quiet too, one line each.
        for warning in event.res.get("warnings") or ():
            print(
                f"{event.host}: {event.task}: warning: {' '.join(str(warning).split())}",
                file=self.stream,
                flush=True,
            )


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
