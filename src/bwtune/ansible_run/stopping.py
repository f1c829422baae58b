"""Stopping ansible-playbook: on Ctrl-C or SIGTERM, and with every worker it started.

ansible-runner SIGKILLs ansible-playbook's process group, but ansible-core's workers each
run in their own session (os.setsid), so they and the modules they run would outlive it:
they are found in /proc and killed by their own process groups.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any


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


@contextmanager
def cancel_on_interrupt() -> Iterator[CancelOnInterrupt]:
    with CancelOnInterrupt() as cancel:
        yield cancel


class Canceller:
    """ansible-runner's cancel callback: True once `cancel` is set, after stopping workers.

    Freeze ansible-playbook first (no new workers), then kill each worker's process group;
    ansible-runner kills the frozen playbook. An async task's daemon has left the tree
    already: it is the cancel playbook's to stop.
    """

    def __init__(self, cancel: threading.Event | None) -> None:
        self.cancel = cancel
        self.done = False

    def __call__(self) -> bool:
        if self.cancel is None or not self.cancel.is_set():
            return False
        if not self.done:
            self.done = True
            stop_playbook_processes(os.getpid())
        return True


def stop_playbook_processes(parent: int) -> None:
    """Freeze each ansible-playbook `parent` started and SIGKILL everything under it."""
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


def kill_playbook_processes(parent: int) -> None:
    """Every ansible-playbook this process started, its workers and itself, SIGKILLed and
    reaped (ansible-runner died before it could stop them)."""
    playbooks = [pid for pid in _children_by_pid().get(parent, []) if b"ansible-playbook" in _cmdline(pid)]
    stop_playbook_processes(parent)
    for pid in playbooks:
        _signal(pid, signal.SIGKILL)
        with suppress(OSError):
            os.waitpid(pid, 0)


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
