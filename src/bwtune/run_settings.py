"""What a run was started with, kept with the run so a resume, an attach or a cancel reuse it.

`$BWTUNE_HOME/runs/<run id>/settings.json` (0600: `-e` values may hold secrets), written when
the sweep starts. `bwtune sweep --resume RUN` and `bwtune demo --resume RUN` take every
setting from it unless given again on the command line; `--force` is never carried over
(a resumed run would measure again what it has just measured).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from bwtune import store

FILE_NAME = "settings.json"


@dataclass
class RunSettings:
    command: str  # "sweep" or "demo": how a resume is spelt
    inventory: str  # absolute path
    limit: str | None = None
    strategy: str | None = None
    forks: int | None = None
    node_results_dir: str | None = None
    node_env: dict[str, str] = field(default_factory=dict)
    extra_vars: list[str] = field(default_factory=list)  # the -e values, an @file made absolute
    matrix_source: str | None = None

    def save(self, run_id: str) -> None:
        path = store.run_dir(run_id) / FILE_NAME
        temporary = path.with_name(FILE_NAME + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(asdict(self), out, indent=1)
        os.replace(temporary, path)

    def resume_command(self, run_id: str) -> str:
        return f"bwtune {self.command} --resume {run_id}"


def load(run_id: str) -> RunSettings | None:
    """The run's settings, or None for a run started before bwtune kept them."""
    path = store.run_dir(run_id) / FILE_NAME
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ValueError(f"run {run_id}: cannot read its settings {path}: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("inventory"), str):
        raise ValueError(f"run {run_id}: {path} is not a settings file")
    known = {name: data[name] for name in RunSettings.__dataclass_fields__ if name in data}
    return RunSettings(**known)
