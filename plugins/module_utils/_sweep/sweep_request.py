# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""What the sweep module was asked to do, checked once: options, matrix, prior, and the plan."""

from __future__ import annotations

import math
import os
import socket
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import (
    results_contract,
    startup_caches,
    sweep_options,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._facts import stack_info
from ansible_collections.bwtune.sglang.plugins.module_utils._plan import matrix_yaml, planner
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategies
from ansible_collections.bwtune.sglang.plugins.module_utils._server import proc_scan
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_state


class BadInput(ValueError):
    """The matrix or the options are wrong: nothing was launched."""


class SweepOptions:
    """What the sweep module was asked to do, checked once.

    An option not given (or None) takes its one default, and a number its bounds, from
    sweep_options.OPTIONS, the table the module's argument_spec is made from.
    """

    def __init__(self, **params: Any) -> None:
        default = sweep_options.DEFAULTS
        self.matrix = _load_matrix(params["matrix"])
        self.results_path = _check_results_path(params["results_path"])
        folder = os.path.dirname(self.results_path)
        self.run_id = params.get("run_id") or os.path.basename(folder)
        try:  # the controller keeps runs under runs/<run id>/: a line it cannot store is lost
            results_contract.check_run_id(self.run_id, "run_id")
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        self.log_dir = os.path.join(folder, "logs")
        python = params.get("python") or default["python"]
        self.launch_command = list(params.get("launch_command") or [python, "-m", "sglang.launch_server"])
        self.env = {str(k): str(v) for k, v in (params.get("env") or {}).items()}
        # Secrets (an HF token) reach the servers' environment only; the module's option is
        # no_log, and nothing the sweep writes or returns carries them.
        self.secret_env = {str(k): str(v) for k, v in (params.get("secret_env") or {}).items()}
        # Every launch's JIT/autotune caches in one directory (startup_caches.STARTUP_CACHE_LAYOUT);
        # what `env` names itself wins over these defaults.
        self.cache_env = startup_caches.startup_cache_env(params.get("cache_dir"))
        self.api_key = params.get("api_key")
        self.host = params.get("host") or default["host"]
        self.port = int(_option(params, "port"))
        self.strategy = params.get("strategy") or default["strategy"]
        if self.strategy not in strategies.STRATEGIES:
            raise BadInput(
                "strategy: unknown %r (expected one of %s)"
                % (self.strategy, ", ".join(strategies.STRATEGIES))
            )
        self.force = bool(params.get("force"))
        self.prior = _check_prior(params.get("prior"))
        self.only_configs = _check_only_configs(params.get("only_configs"), self.strategy)
        self.simulated = bool(params.get("simulated"))
        self.facts = params.get("facts") or {}
        self.gpu = params.get("gpu")
        self.sglang_version = params.get("sglang_version")
        self.startup_timeout_s = float(_option(params, "startup_timeout_s"))
        self.stop_grace_s = float(_option(params, "stop_grace_s"))
        self.release_timeout_s = float(_option(params, "release_timeout_s"))
        stack = self.facts.get("stack") or {}
        self.fingerprint = str(stack.get("fingerprint") or "unknown")
        # Every line records the components too: a regression names the one that changed.
        self.stack_components = stack_info.components(stack)
        self.node = params.get("node") or socket.gethostname()
        # One sweep per node at a time: every sweep whose results share this folder's parent
        # (the node's results root) takes this lock.
        self.node_lock_path = os.path.abspath(
            os.path.expanduser(params.get("node_lock") or sweep_state.node_lock_path(self.results_path))
        )

    def launch_env(self, marker: str) -> dict[str, str]:
        """A server's environment on top of the sweep's: the shared caches, then what the user
        gave (sweep_env, then the secrets), then the marker that finds the server again."""
        return {**self.cache_env, **self.env, **self.secret_env, proc_scan.SERVER_MARKER: marker}

    def secrets(self) -> list[str]:
        """Values that must not appear in anything the sweep records (log tails, messages)."""
        return [v for v in [self.api_key, *self.secret_env.values()] if v]

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> SweepOptions:
        return cls(**params)


def _option(params: dict[str, Any], name: str) -> Any:
    """Option `name` as given, or its default, within its bounds (sweep_options.OPTIONS)."""
    try:
        return sweep_options.value(params, name)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def _check_results_path(given: Any) -> str:
    """An absolute (or ~-relative) results file whose run folder is not in the filesystem root:
    an empty results folder (sweep_results_dir: "") would put the run at /<run id>/ and the
    node lock at /.bwtune-node.lock, a relative one under whatever folder the module runs in."""
    text = str(given or "")
    path = os.path.expanduser(text)
    if not os.path.isabs(path):
        raise BadInput(
            "results_path: %r must be an absolute or ~-relative path "
            "(is sweep_results_dir empty or relative?)" % text
        )
    path = os.path.normpath(path)
    if os.path.dirname(os.path.dirname(path)) == os.sep:  # the results root is /
        raise BadInput(
            "results_path: %r puts the run's folder in the filesystem root (is sweep_results_dir empty?): "
            "give a folder for the runs, e.g. ~/.local/share/bwtune/sweeps" % text
        )
    return path


# The one strategy whose launches are the plan's, whatever the launches before measured: a
# fleet sweep can share them out among hosts up front (only_configs).
FIXED_LAUNCHES = ("grid",)


def _check_only_configs(given: Any, strategy: str) -> list[str] | None:
    """This node's share of the plan's launches (config ids, each once), or None: every launch."""
    if given is None:
        return None
    if not isinstance(given, (list, tuple)):
        raise BadInput("only_configs: expected a list of config ids, got %r" % (given,))
    if strategy not in FIXED_LAUNCHES:
        raise BadInput(
            "only_configs: given with strategy %r, whose launches depend on what earlier launches "
            "measured; a share of the plan's launches is for strategy %s"
            % (strategy, " or ".join(FIXED_LAUNCHES))
        )
    seen: dict[str, None] = {}
    for n, config in enumerate(given):
        if not isinstance(config, str) or not config:
            raise BadInput("only_configs[%d]: %r is not a config id" % (n, config))
        if config in seen:
            raise BadInput("only_configs[%d]: %r is listed twice" % (n, config))
        seen[config] = None
    return list(seen)


def check_share(options: SweepOptions, the_plan: dict[str, Any]) -> None:
    """Every id of only_configs is a launch of this node's plan (else the controller planned
    another plan than the node's, and a launch would be lost): BadInput naming the first."""
    if options.only_configs is None:
        return
    launches = {launch["config"] for launch in the_plan.get("launches", [])}
    statuses = {c["id"]: c.get("status") for c in the_plan.get("configs", [])}
    for config in options.only_configs:
        if config not in launches:
            why = (
                "is %s in this node's plan" % statuses[config]
                if config in statuses
                else "is not a config of this node's plan (gpu %s, SGLang %s)"
                % (the_plan.get("gpu"), the_plan.get("sglang_version"))
            )
            raise BadInput("only_configs: %r %s: nothing was launched" % (config, why))


def _check_prior(prior: Any) -> list[dict[str, Any]]:
    """The prior as given (a list of {config or flags, score}); one bad entry is BadInput."""
    if prior is None:
        return []
    if not isinstance(prior, list):
        raise BadInput("prior: expected a list of {config or flags, score}, got %r" % (prior,))
    checked = []
    for n, entry in enumerate(prior):
        where = "prior[%d]" % n
        if not isinstance(entry, dict):
            raise BadInput("%s: expected a mapping with config or flags and score, got %r" % (where, entry))
        config, flags, score = entry.get("config"), entry.get("flags"), entry.get("score")
        if config is None and flags is None:
            raise BadInput("%s: names no config (give config: <id> or flags: {...})" % where)
        if config is not None and not isinstance(config, str):
            raise BadInput("%s.config: expected a config id, got %r" % (where, config))
        if flags is not None and not isinstance(flags, dict):
            raise BadInput("%s.flags: expected a mapping of SGLang flags, got %r" % (where, flags))
        if (
            isinstance(score, bool)
            or not isinstance(score, (int, float))
            or not math.isfinite(score)
            or score <= 0
        ):
            raise BadInput("%s.score: expected a positive number, got %r" % (where, score))
        checked.append({"config": config, "flags": flags, "score": float(score)})
    return checked


def prior_scores(prior: list[dict[str, Any]], the_plan: dict[str, Any]) -> dict[str, float]:
    """config id of this plan -> the prior's score (by id, else by identical flags)."""
    by_flags = {repr(sorted(c.get("flags", {}).items())): c["id"] for c in the_plan.get("configs", [])}
    ids = {c["id"] for c in the_plan.get("configs", [])}
    scores: dict[str, float] = {}
    for entry in prior:
        config_id = entry["config"] if entry["config"] in ids else None
        if config_id is None and entry["flags"] is not None:
            config_id = by_flags.get(repr(sorted(entry["flags"].items())))
        if config_id is not None:
            scores[config_id] = entry["score"]
    return scores


def _load_matrix(matrix: Any) -> dict[str, Any]:
    """The matrix as given (a mapping), or read from a file on the node with the reader's limits."""
    if isinstance(matrix, dict):
        return matrix
    if isinstance(matrix, str):
        path = os.path.expanduser(matrix)
        try:
            loaded = matrix_yaml.load(matrix_yaml.read_text(path), path)
        except matrix_yaml.MatrixTextError as exc:
            raise BadInput("matrix: %s" % exc) from None
        if isinstance(loaded, dict):
            return loaded
    raise BadInput("matrix: expected a mapping or the path of a YAML/JSON file, got %r" % (matrix,))


def make_plan(options: SweepOptions) -> dict[str, Any]:
    try:
        the_plan = planner.plan(
            options.matrix,
            gpu=options.gpu,
            sglang_version=options.sglang_version,
            facts=options.facts or None,
        )
    except planner.MatrixError as exc:
        raise BadInput("matrix: %s" % exc) from None
    planned = the_plan.to_dict()
    check_share(options, planned)
    return planned
