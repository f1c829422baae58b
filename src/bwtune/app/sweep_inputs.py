"""What a sweep run is asked to do, and what it comes to: the request and the outcome.

The request (`SweepRequest`: typed; the commands build it from their options), the matrix
read and planned on the controller, a run's saved settings and matrix (for resume, attach
and cancel), the bad-input errors, and `SweepOutcome`. Nothing here parses a command line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import plan
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.catalog import CatalogError
from bwtune import ansible_run, matrix_file, run_settings, store
from bwtune.app import playbook_args

SWEEP_PLAYBOOK, CANCEL_PLAYBOOK, ATTACH_PLAYBOOK = "sweep.yml", "sweep_cancel.yml", "sweep_attach.yml"
FOLLOW_S = 2  # the live view's refresh: how long one look at the node's sweep may wait
STRATEGIES = contract.STRATEGIES
AUTO_NEEDS_FACTS = "is auto but no facts give it"
# Where a node keeps its results files unless its inventory says otherwise (the sweep role's default).
NODE_RESULTS_DIR = "~/.local/share/bwtune/sweeps"


class BadInput(ValueError):
    """Bad user input: one line, exit 2."""


class NothingToLaunch(BadInput):
    """The matrix plans no launch on the controller (every config pruned or a duplicate):
    one line, exit 3 (NOTHING_MEASURED), before any playbook runs."""


@dataclass
class SweepRequest:
    inventory: ansible_run.Inventory
    matrix: dict[str, Any]
    matrix_source: str
    run_id: str
    command: str = "sweep"  # how a resume is spelt: "sweep" or "demo"
    limit: str | None = None
    strategy: str = contract.DEFAULT_STRATEGY
    force: bool = False
    forks: int | None = None
    node_results_dir: str | None = None
    quiet: bool = False
    resumed: bool = False
    node_env: dict[str, str] = field(default_factory=dict)
    # adaptive's prior (the sweep module's `prior`): read from the results database by run_sweep.
    prior: list[dict[str, Any]] = field(default_factory=list)
    prior_runs: list[str] = field(default_factory=list)  # the runs the prior's scores come from
    extra_vars: list[str] = field(default_factory=list)  # -e values, checked
    verbosity: int = 0

    def extravars(self) -> dict[str, Any]:
        extravars: dict[str, Any] = {
            "sweep_matrix": self.matrix,
            "bwtune_run_id": self.run_id,
            "sweep_strategy": self.strategy,
            "sweep_force": self.force,
            # Each look waits at most this long, so each retry brings the live view its progress
            # (the plain playbook's default waits quietly for the end).
            "sweep_follow_s": FOLLOW_S,
        }
        if self.node_results_dir:
            extravars["sweep_results_dir"] = self.node_results_dir
        if self.node_env:
            extravars["sweep_env"] = self.node_env
        if self.prior:
            extravars["sweep_prior"] = self.prior
        return extravars

    def run_extravars(self) -> dict[str, Any]:
        """What the cancel and attach playbooks need: the run and where its results are."""
        extravars: dict[str, Any] = {"bwtune_run_id": self.run_id}
        if self.node_results_dir:
            extravars["sweep_results_dir"] = self.node_results_dir
        return extravars

    def extra_args(self) -> list[str]:
        return playbook_args.extra_vars_args(self.extra_vars)

    def settings(self) -> run_settings.RunSettings:
        return run_settings.RunSettings(
            command=self.command,
            inventory=str(self.inventory.path),
            limit=self.limit,
            strategy=self.strategy,
            forks=self.forks,
            node_results_dir=self.node_results_dir,
            node_env=dict(self.node_env),
            extra_vars=list(self.extra_vars),
            matrix_source=self.matrix_source,
        )

    def resume_command(self) -> str:
        return self.settings().resume_command(self.run_id)

    def node_results_paths(self) -> dict[str, str]:
        """host -> its results file, as the sweep role finds it (for messages)."""
        paths = {}
        for host in self.inventory.hosts:
            folder = self.node_results_dir or self.inventory.hostvars[host].get("sweep_results_dir")
            paths[host] = f"{folder or NODE_RESULTS_DIR}/{self.run_id}/results.jsonl"
        return paths


def load_settings(run_id: str, flag: str) -> run_settings.RunSettings | None:
    try:
        contract.check_run_id(run_id, flag)
        return run_settings.load(run_id)
    except ValueError as err:
        raise BadInput(str(err)) from None


def unknown_run(run_id: str, flag: str) -> BadInput:
    """A run given by id that left nothing here to go on: no such run, or one without settings."""
    if not store.run_dir(run_id).is_dir():
        return BadInput(
            f"{flag} {run_id}: no run {run_id} was started from here "
            f"(`bwtune runs` lists the runs; they live in {store.run_dir(run_id).parent})"
        )
    return BadInput(f"{flag} {run_id}: give an inventory with -i INVENTORY (run {run_id} kept none)")


def saved_matrix(run_id: str, flag: str) -> tuple[dict[str, Any], str]:
    saved = store.run_dir(run_id) / "matrix.json"
    if not saved.is_file():
        if flag == "--attach":
            raise BadInput(
                f"--attach {run_id}: no such run started from here ({saved.parent} has no matrix.json)"
            )
        raise BadInput(f"{flag} {run_id}: no matrix saved for that run; give -m MATRIX")
    return json.loads(saved.read_text(encoding="utf-8")), str(saved)


@dataclass
class SweepOutcome:
    run_id: str
    exit_code: int
    output: dict[str, Any] | None = None  # the --json shape, from the results database
    messages: list[str] = field(default_factory=list)  # one line each, for stderr
    reports: list[Path] = field(default_factory=list)


def load_matrix(path: str | Path) -> dict[str, Any]:
    """Read and plan a matrix on the controller; BadInput names the file, line and key.

    A matrix with `gpu: auto` or `version: auto` is planned again on each node with its
    facts; here it is checked as far as it can be without them.
    """
    try:
        matrix = matrix_file.load(Path(path).expanduser())
    except matrix_file.MatrixFileError as err:
        raise BadInput(str(err)) from None
    if not isinstance(matrix.data, dict):
        raise BadInput(f"{matrix.path}: a matrix is a mapping, not {type(matrix.data).__name__}")
    try:
        planned = plan(matrix.data)
    except MatrixError as err:
        if AUTO_NEEDS_FACTS not in err.message:
            raise BadInput(f"{matrix.where(err.path)}: {err}") from None
    except CatalogError as err:
        raise BadInput(f"{matrix.path}: {err}") from None
    else:
        # GPU and release are known here, so the node's plan is this one: nothing to launch
        # is decided now, not after a playbook run.
        if not planned.launches:
            s = planned.summary
            raise NothingToLaunch(
                f"{matrix.path}: nothing to launch: all {s['expanded']} configs are pruned "
                f"({s['pruned']}) or duplicates ({s['duplicates']}) on {planned.gpu}, SGLang "
                f"{planned.sglang_version}; nothing was run (`bwtune plan {path}` says why)"
            )
    return dict(matrix.data)
