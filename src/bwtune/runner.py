"""Run the collection's playbooks through ansible-runner and read their outcome from events.

Every `bwtune` command that touches a host is one `run_playbook` call. What a playbook
produced is read from the event stream (`runner_on_ok` results, per-host failures,
`runner_retry` progress, `playbook_on_stats` and its `set_stats` artifact data), never from
the fact cache, whose format changed under ansible-core 2.19.

ansible-runner writes the extravars (env/extravars) and the controller's environment
(artifacts/<ident>/command) into the private data dir. That dir lives under the run
directory, which is created 0700; ansible-runner itself creates those files 0600.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, redirect_stdout, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import ansible_runner

from bwtune import collection, playbook_guard
from bwtune.results_db import run_dir

# How often (s) ansible-runner polls the cancel callback while the playbook is quiet.
_CANCEL_POLL_S = 0.5
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


class InventoryError(ValueError):
    """The inventory path is missing or Ansible cannot parse it (bad input, exit 2)."""


@dataclass(frozen=True)
class Inventory:
    """An inventory as Ansible reads it: its path and every host with its variables."""

    path: Path
    hostvars: dict[str, dict[str, Any]]

    @property
    def hosts(self) -> list[str]:
        return sorted(self.hostvars)

    def simulated(self, host: str) -> bool:
        return _truthy(self.hostvars.get(host, {}).get("bwtune_simulated"))


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
        return [_ANSI.sub("", line) for line in text.splitlines()[-lines:]]


def bwtune_bin(name: str) -> str:
    """An Ansible console script from this interpreter's environment, else from PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name) or name


def load_inventory(path: str | os.PathLike[str], limit: str | None = None) -> Inventory:
    """Parse an inventory with Ansible (ansible-inventory) before anything runs.

    Raises InventoryError with one line naming the path and Ansible's reason.
    """
    source = Path(path).expanduser()
    if not source.exists():
        raise InventoryError(f"inventory {path}: no such file or directory")
    argv = [bwtune_bin("ansible-inventory"), "-i", str(source.resolve()), "--list"]
    if limit:
        argv += ["--limit", limit]
    env = {**os.environ, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True", "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise InventoryError(f"inventory {path}: {_inventory_reason(proc.stderr, source)}")
    listing = json.loads(proc.stdout)
    hostvars: dict[str, dict[str, Any]] = dict(listing.get("_meta", {}).get("hostvars", {}))
    for host in _all_hosts(listing, "all"):
        hostvars.setdefault(host, {})
    if not hostvars:
        where = f" matching --limit {limit!r}" if limit else ""
        raise InventoryError(f"inventory {path}: no hosts{where}")
    return Inventory(source.resolve(), hostvars)


def new_run_id() -> str:
    """A sortable, readable run id: UTC time plus 4 random hex digits."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + os.urandom(2).hex()


def private_data_dir(run_id: str) -> Path:
    """`$BWTUNE_HOME/runs/<run_id>/runner`, created private (0700) with its run dir."""
    path = run_dir(run_id) / "runner"
    for directory in (run_dir(run_id).parent.parent, run_dir(run_id).parent):
        directory.mkdir(parents=True, exist_ok=True)
    for directory in (run_dir(run_id), path):
        directory.mkdir(mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
    return path


class CancelOnInterrupt:
    """A threading.Event set by SIGINT (Ctrl-C) or SIGTERM while the context is active.

    ansible-runner polls `callback`; once it returns True it stops ansible-playbook.
    A second Ctrl-C restores Python's default handling (KeyboardInterrupt).
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self._previous: dict[int, Any] = {}

    def callback(self) -> bool:
        return self.event.is_set()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.event.is_set():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self.event.set()

    def __enter__(self) -> CancelOnInterrupt:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()


def run_playbook(
    name: str | os.PathLike[str],
    inventory: Inventory | str | os.PathLike[str],
    extravars: Mapping[str, Any] | None = None,
    limit: str | None = None,
    forks: int | None = None,
    private_data_dir: str | os.PathLike[str] | None = None,
    on_event: Callable[[RunnerEvent], None] | None = None,
    quiet: bool = False,
    cancel: threading.Event | None = None,
    envvars: Mapping[str, str] | None = None,
    verbosity: int = 0,
    extra_args: Sequence[str] = (),
) -> PlaybookRun:
    """Run a playbook of the collection (`name`, e.g. "sweep.yml") or a playbook path.

    `on_event` sees every event of interest as it happens (the live view). Setting
    `cancel` stops ansible-playbook at the next poll; the run's status is then "canceled".
    `verbosity` (0-4) is ansible-playbook's -v count; above 0 its output goes to stderr.
    `extra_args` are more ansible-playbook arguments (the user's `-e` values).
    ansible-playbook ends when this process ends, even by SIGKILL (`bwtune.playbook_guard`).
    """
    playbook = Path(name) if os.path.isabs(name) else collection.playbook(str(name))
    if not playbook.is_file():
        raise FileNotFoundError(f"playbook {playbook} not found")
    inv_path = inventory.path if isinstance(inventory, Inventory) else Path(inventory).expanduser()
    if not inv_path.exists():
        raise InventoryError(f"inventory {inventory}: no such file or directory")
    pdd = Path(private_data_dir) if private_data_dir else _scratch_dir()
    pdd.mkdir(mode=0o700, parents=True, exist_ok=True)
    # ansible-runner never overwrites env/extravars: drop the previous playbook's.
    shutil.rmtree(pdd / "env", ignore_errors=True)
    ident = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ") + "-" + playbook.stem
    outcome = PlaybookRun(playbook=playbook, private_data_dir=pdd, ident=ident)

    def handle(event: dict[str, Any]) -> bool:
        reduced = _reduce(event)
        if reduced is not None:
            _record(outcome, reduced)
            if on_event is not None:
                on_event(reduced)
        return True

    bin_dir = str(Path(bwtune_bin("ansible-playbook")).parent)
    env = {
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        **(envvars or {}),
    }
    command = _guarded(playbook, extra_args)
    if command is not None:
        env[playbook_guard.PARENT_ENV] = str(os.getpid())
    else:
        command = {"playbook": str(playbook), "cmdline": shlex.join(extra_args) or None}
    # ansible-runner prints ansible-playbook's output on sys.stdout; stdout is for results.
    silent = quiet and not verbosity
    with nullcontext() if silent else redirect_stdout(sys.stderr):
        runner = ansible_runner.run(
            private_data_dir=str(pdd),
            ident=ident,
            inventory=str(inv_path.resolve()),
            extravars=dict(extravars or {}),
            envvars=env,
            settings={"pexpect_timeout": _CANCEL_POLL_S},
            limit=limit,
            forks=forks,
            verbosity=verbosity or None,
            quiet=silent,
            event_handler=handle,
            cancel_callback=_Canceller(cancel),
            **command,
        )
    outcome.rc = int(runner.rc) if runner.rc is not None else -1
    outcome.status = str(runner.status)
    if outcome.rc != 0 and not outcome.canceled and not outcome.stats:
        outcome.error = _first_error(outcome.stdout_tail(200)) or f"ansible-playbook exited {outcome.rc}"
    return outcome


def _guarded(playbook: Path, extra_args: Sequence[str]) -> dict[str, Any] | None:
    """ansible-runner's `binary` and `cmdline` that start ansible-playbook under
    `bwtune.playbook_guard`; None where prctl(PR_SET_PDEATHSIG) does not exist (not Linux).

    ansible-runner runs `binary`, then `cmdline`, then the arguments it builds (inventory,
    limit, extravars, -v, forks): all of them end up as ansible-playbook's arguments.
    """
    if not sys.platform.startswith("linux"):
        return None
    guard = ["-m", "bwtune.playbook_guard", bwtune_bin("ansible-playbook")]
    return {"binary": sys.executable, "cmdline": shlex.join([*guard, *extra_args, str(playbook)])}


class _Canceller:
    """ansible-runner's cancel callback: True once `cancel` is set, after stopping workers.

    ansible-runner SIGKILLs ansible-playbook's process group, but ansible-core's workers
    each run in their own session (os.setsid), so they and the modules they run would
    outlive it. Freeze ansible-playbook first (no new workers), then kill each worker's
    process group; ansible-runner kills the frozen playbook. An async task's daemon has
    left the tree already: it is the cancel playbook's to stop.
    """

    def __init__(self, cancel: threading.Event | None) -> None:
        self.cancel = cancel
        self.done = False

    def __call__(self) -> bool:
        if self.cancel is None or not self.cancel.is_set():
            return False
        if not self.done:
            self.done = True
            _stop_playbook_processes(os.getpid())
        return True


def _stop_playbook_processes(parent: int) -> None:
    children = _children_by_pid()
    playbooks = [pid for pid in children.get(parent, []) if b"ansible-playbook" in _cmdline(pid)]
    for pid in playbooks:
        _signal(pid, signal.SIGSTOP)
    for pid in playbooks:
        stack, tree = list(children.get(pid, [])), []
        while stack:
            child = stack.pop()
            tree.append(child)
            stack.extend(children.get(child, []))
        for child in tree:
            try:
                if os.getpgid(child) == child:
                    os.killpg(child, signal.SIGKILL)
            except OSError:
                pass
            _signal(child, signal.SIGKILL)


def _children_by_pid() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:  # no procfs: ansible-runner's own kill is all there is
        return children
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read()
    except OSError:
        return b""


def _signal(pid: int, signum: int) -> None:
    with suppress(OSError):
        os.kill(pid, signum)


# --------------------------------------------------------------------------- events


def _reduce(event: dict[str, Any]) -> RunnerEvent | None:
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


def _record(outcome: PlaybookRun, event: RunnerEvent) -> None:
    if event.kind == "ok":
        outcome.ok.append(event)
    elif event.kind in ("failed", "unreachable") and event.host:
        if event.data.get("ignore_errors"):
            return
        message = _failure_message(event.res)
        outcome.failures.setdefault(event.host, HostFailure(event.host, event.kind, event.task, message))
    elif event.kind == "stats":
        outcome.stats = event.data
        outcome.artifact_data = dict(event.data.get("artifact_data") or {})


def _failure_message(res: Mapping[str, Any]) -> str:
    message = res.get("msg") or res.get("stderr") or res.get("reason") or "no message"
    text = " ".join(str(message).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _same_action(resolved: str | None, wanted: str) -> bool:
    """`wanted` as a FQCN must match exactly; a short name matches any collection's."""
    if not resolved:
        return False
    if "." in wanted:
        return resolved == wanted
    return resolved.rsplit(".", 1)[-1] == wanted


# --------------------------------------------------------------------------- helpers

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _first_error(lines: list[str]) -> str | None:
    for index, line in enumerate(lines):
        if line.startswith("[ERROR]:") or line.startswith("ERROR!"):
            text = line.split(":", 1)[1] if line.startswith("[ERROR]") else line[len("ERROR!") :]
            extra = lines[index + 1].strip() if index + 1 < len(lines) else ""
            if extra.startswith("Origin:"):
                text = f"{text.strip()} ({extra})"
            return text.strip()
    return None


def _inventory_reason(stderr: str, source: Path) -> str:
    text = _ANSI.sub("", stderr)
    plugin = "yaml" if source.suffix in (".yml", ".yaml") else "ini"
    failures = re.findall(r"Failed to parse inventory with '([\w.]+)' plugin: (.*)", text)
    for name, reason in failures:
        if name == plugin:
            return f"cannot be parsed as {name}: {reason.strip()}"
    if failures:
        return f"cannot be parsed as {failures[0][0]}: {failures[0][1].strip()}"
    errors = re.findall(r"\[ERROR\]: (.*)", text)
    return errors[-1].strip() if errors else (text.strip().splitlines() or ["cannot be parsed"])[-1]


def _all_hosts(listing: Mapping[str, Any], group: str, seen: set[str] | None = None) -> Iterator[str]:
    seen = seen if seen is not None else set()
    if group in seen:
        return
    seen.add(group)
    entry = listing.get(group) or {}
    yield from entry.get("hosts", [])
    for child in entry.get("children", []):
        yield from _all_hosts(listing, child, seen)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _scratch_dir() -> Path:
    return private_data_dir("adhoc-" + new_run_id())


@contextmanager
def cancel_on_interrupt() -> Iterator[CancelOnInterrupt]:
    with CancelOnInterrupt() as cancel:
        yield cancel
