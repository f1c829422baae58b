"""Run one of the collection's playbooks through ansible-runner.

Every `bwtune` command that touches a host is one `run_playbook` call; what it produced is
read from its events (`bwtune.ansible_run.events`).

ansible-runner writes the extravars (env/extravars) and the controller's environment
(artifacts/<ident>/command) into the private data dir. That dir lives under the run
directory, which is created 0700; ansible-runner itself creates those files 0600.
"""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext, redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ansible_runner

from bwtune import collection
from bwtune.ansible_run import playbook_guard
from bwtune.ansible_run.console_scripts import bwtune_bin
from bwtune.ansible_run.events import PlaybookRun, RunnerEvent, first_error, record, reduce
from bwtune.ansible_run.inventory import Inventory, InventoryError
from bwtune.ansible_run.run_dirs import scratch_dir
from bwtune.ansible_run.stopping import Canceller, kill_playbook_processes

# How often (s) ansible-runner polls the cancel callback while the playbook is quiet.
_CANCEL_POLL_S = 0.5


class ArtifactWriteError(OSError):
    """ansible-runner could not write the playbook's events or output (BWTUNE_HOME full or
    read-only): the playbook was stopped. One line: the path and the reason."""

    def __str__(self) -> str:
        return str(self.strerror)


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
    ansible-playbook ends when this process ends, even by SIGKILL
    (`bwtune.ansible_run.playbook_guard`).
    """
    playbook = Path(name) if os.path.isabs(name) else collection.playbook(str(name))
    if not playbook.is_file():
        raise FileNotFoundError(f"playbook {playbook} not found")
    inv_path = inventory.path if isinstance(inventory, Inventory) else Path(inventory).expanduser()
    if not inv_path.exists():
        raise InventoryError(f"inventory {inventory}: no such file or directory")
    pdd = Path(private_data_dir) if private_data_dir else scratch_dir()
    pdd.mkdir(mode=0o700, parents=True, exist_ok=True)
    # ansible-runner never overwrites env/extravars: drop the previous playbook's.
    shutil.rmtree(pdd / "env", ignore_errors=True)
    ident = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ") + "-" + playbook.stem
    outcome = PlaybookRun(playbook=playbook, private_data_dir=pdd, ident=ident)

    def handle(event: dict[str, Any]) -> bool:
        reduced = reduce(event)
        if reduced is not None:
            record(outcome, reduced)
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
    try:
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
                cancel_callback=Canceller(cancel),
                **command,
            )
    except Exception as exc:
        # ansible-runner writes every event and all output under pdd; a full (or read-only)
        # BWTUNE_HOME raises out of its loop (OSError, or a ValueError reading back an event
        # file cut short), leaving ansible-playbook behind. End it, and say so in one line
        # (the caller knows what was kept where).
        full = _no_space(pdd)
        if not isinstance(exc, OSError) and not full:
            raise
        kill_playbook_processes(os.getpid())
        code = errno.ENOSPC if full else getattr(exc, "errno", None)
        reason = os.strerror(errno.ENOSPC) if full else (getattr(exc, "strerror", None) or str(exc))
        raise ArtifactWriteError(code, f"cannot write {pdd}: {reason}") from None
    outcome.rc = int(runner.rc) if runner.rc is not None else -1
    outcome.status = str(runner.status)
    if outcome.rc != 0 and not outcome.canceled and not outcome.stats:
        outcome.error = first_error(outcome.stdout_tail(200)) or f"ansible-playbook exited {outcome.rc}"
    return outcome


def _guarded(playbook: Path, extra_args: Sequence[str]) -> dict[str, Any] | None:
    """ansible-runner's `binary` and `cmdline` that start ansible-playbook under
    `bwtune.ansible_run.playbook_guard`; None where prctl(PR_SET_PDEATHSIG) does not exist
    (not Linux).

    ansible-runner runs `binary`, then `cmdline`, then the arguments it builds (inventory,
    limit, extravars, -v, forks): all of them end up as ansible-playbook's arguments.
    """
    if not sys.platform.startswith("linux"):
        return None
    guard = ["-m", playbook_guard.__name__, bwtune_bin("ansible-playbook")]
    return {"binary": sys.executable, "cmdline": shlex.join([*guard, *extra_args, str(playbook)])}


def _no_space(path: Path, below: int = 1 << 20) -> bool:
    """Less than `below` bytes left for this user on path's filesystem."""
    try:
        found = os.statvfs(path)
    except OSError:
        return False
    return found.f_bavail * found.f_frsize < below
