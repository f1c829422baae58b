# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-side sweep: plan, then launch, gate, measure, stop and record each config.

Every config of the plan ends as exactly one line of the results file, written and
fsync'd before the next launch starts: measured configs with their metrics, failed
ones with their failure class and log tail, pruned and duplicate ones with the
planner's reasons. A failed config never stops the sweep; a server that will not go
away does (``SweepFailed``), because every later measurement would be wrong.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import time
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

from ansible_collections.bwtune.sglang.plugins.module_utils import (
    bench_client,
    correctness,
    launcher,
    matrix_yaml,
    planner,
    results_contract,
    results_file,
    stack_info,
    strategies,
    sweep_state,
)

# The name of the screening workload in a result's metrics (strategy "screen").
SCREEN = results_contract.SCREEN_WORKLOAD

# A crashing server's sockets close before the kernel reports the process dead, so a client
# sees the broken connection first: after errors, wait this long before calling it alive.
DEATH_GRACE_S = 2.0
# A launch whose port another process took before the server bound it is started again on
# the next free port, this many times at most (then the sweep stops: the node is too busy).
PORT_ATTEMPTS = 5


class BadInput(ValueError):
    """The matrix or the options are wrong: nothing was launched."""


class SweepFailed(RuntimeError):
    """The sweep itself could not go on (e.g. a server that would not stop)."""

    def __init__(self, message: str, partial: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.partial = partial or {}


class Cancelled(Exception):
    """SIGTERM: stop the server in flight, keep every result so far, and exit."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class SweepOptions:
    """What the sweep module was asked to do, checked once."""

    def __init__(self, **params: Any) -> None:
        self.matrix = _load_matrix(params["matrix"])
        self.results_path = os.path.abspath(os.path.expanduser(params["results_path"]))
        folder = os.path.dirname(self.results_path)
        self.run_id = params.get("run_id") or os.path.basename(folder)
        try:  # the controller keeps runs under runs/<run id>/: a line it cannot store is lost
            results_contract.check_run_id(self.run_id, "run_id")
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        self.log_dir = os.path.join(folder, "logs")
        python = params.get("python") or "python3"
        self.launch_command = list(params.get("launch_command") or [python, "-m", "sglang.launch_server"])
        self.env = {str(k): str(v) for k, v in (params.get("env") or {}).items()}
        # Secrets (an HF token) reach the servers' environment only; the module's option is
        # no_log, and nothing the sweep writes or returns carries them.
        self.secret_env = {str(k): str(v) for k, v in (params.get("secret_env") or {}).items()}
        # Every launch's JIT/autotune caches in one directory (launcher.STARTUP_CACHE_LAYOUT);
        # what `env` names itself wins over these defaults.
        self.cache_env = launcher.startup_cache_env(params.get("cache_dir"))
        self.api_key = params.get("api_key")
        self.host = params.get("host") or "127.0.0.1"
        self.port = int(params.get("port") or 30000)
        self.strategy = params.get("strategy") or "grid"
        if self.strategy not in strategies.STRATEGIES:
            raise BadInput(
                "strategy: unknown %r (expected one of %s)"
                % (self.strategy, ", ".join(strategies.STRATEGIES))
            )
        self.force = bool(params.get("force"))
        self.prior = _check_prior(params.get("prior"))
        self.simulated = bool(params.get("simulated"))
        self.facts = params.get("facts") or {}
        self.gpu = params.get("gpu")
        self.sglang_version = params.get("sglang_version")
        self.startup_timeout_s = float(params.get("startup_timeout_s") or 1200.0)
        self.stop_grace_s = float(params.get("stop_grace_s") or 30.0)
        self.release_timeout_s = float(params.get("release_timeout_s") or 120.0)
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

    def launch_env(self, marker: str) -> Dict[str, str]:
        """A server's environment on top of the sweep's: the shared caches, then what the user
        gave (sweep_env, then the secrets), then the marker that finds the server again."""
        return {**self.cache_env, **self.env, **self.secret_env, launcher.SERVER_MARKER: marker}

    def secrets(self) -> List[str]:
        """Values that must not appear in anything the sweep records (log tails, messages)."""
        return [v for v in [self.api_key, *self.secret_env.values()] if v]

    @classmethod
    def from_params(cls, params: Dict[str, Any]) -> "SweepOptions":
        return cls(**params)


def _check_prior(prior: Any) -> List[Dict[str, Any]]:
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


def prior_scores(prior: List[Dict[str, Any]], the_plan: Dict[str, Any]) -> Dict[str, float]:
    """config id of this plan -> the prior's score (by id, else by identical flags)."""
    by_flags = {repr(sorted(c.get("flags", {}).items())): c["id"] for c in the_plan.get("configs", [])}
    ids = {c["id"] for c in the_plan.get("configs", [])}
    scores: Dict[str, float] = {}
    for entry in prior:
        config_id = entry["config"] if entry["config"] in ids else None
        if config_id is None and entry["flags"] is not None:
            config_id = by_flags.get(repr(sorted(entry["flags"].items())))
        if config_id is not None:
            scores[config_id] = entry["score"]
    return scores


def _load_matrix(matrix: Any) -> Dict[str, Any]:
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


def make_plan(options: SweepOptions) -> Dict[str, Any]:
    try:
        the_plan = planner.plan(
            options.matrix,
            gpu=options.gpu,
            sglang_version=options.sglang_version,
            facts=options.facts or None,
        )
    except planner.MatrixError as exc:
        raise BadInput("matrix: %s" % exc) from None
    return the_plan.to_dict()


def _free_port(host: str, first: int) -> int:
    for port in range(first, first + 200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    raise SweepFailed("no free port between %d and %d on %s" % (first, first + 199, host))


class Sweep:
    """One sweep process: its options, plan, results file and progress."""

    def __init__(self, options: SweepOptions, the_plan: Dict[str, Any]) -> None:
        self.options = options
        self.plan = the_plan
        self.configs = {c["id"]: c for c in the_plan["configs"]}
        # The plan's workloads carry every key with its default written out: the one definition.
        self.workloads = {launch["config"]: launch["workloads"] for launch in the_plan["launches"]}
        self.objective = strategies.Objective.from_matrix({**options.matrix, **the_plan})
        self.scores = strategies.Scoreboard(self.objective)
        self.results = results_file.ResultsFile(options.results_path)
        self.reference: Optional[List[Dict[str, Any]]] = None
        # The gate under load: the workloads' own sampled outputs (correctness.OutputAudit).
        self.output_audit = correctness.OutputAudit()
        self.lines: List[Dict[str, Any]] = []
        self.launches = 0

    # -- one line per config -----------------------------------------------------------

    def _line(self, config: Dict[str, Any], status: str, **extra: Any) -> Dict[str, Any]:
        """A results line (results_contract.make_line: every field, nothing unknown)."""
        fields: Dict[str, Any] = {
            "run_id": self.options.run_id,
            "host": self.options.node,
            "config_id": config["id"],
            "point": config.get("point", {}),
            "flags": config.get("flags", {}),
            "argv": list(config.get("argv", [])),
            "launch_command": list(self.options.launch_command),
            "status": status,
            "simulated": self.options.simulated,
            "stack_fingerprint": self.options.fingerprint,
            "stack": self.options.stack_components,
            "gpu": self.plan.get("gpu"),
            "sglang_version": self.plan.get("sglang_version"),
            "finished_at": _now(),
            "reasons": config.get("reasons", []),
        }
        fields.update(extra)
        return results_contract.make_line(**fields)

    def _record(self, line: Dict[str, Any]) -> None:
        try:
            self.results.append(line)
        except OSError as exc:
            raise SweepFailed(
                "cannot write %s: %s; the config %s was measured but not recorded"
                % (self.results.path, exc.strerror or exc, line.get("config_id")),
                partial=self._partial(),
            ) from None
        self.scores.record(line)
        self.lines.append(line)

    # -- the run ------------------------------------------------------------------------

    def run(self) -> Dict[str, Any]:
        # This run first (a resume of a run still running says so), then the node.
        self._lock = _lock_results(self.options.results_path)
        self._node_lock = _lock_node(self.options)
        _writing(self.options.log_dir, os.makedirs, self.options.log_dir, exist_ok=True)
        sweep_state.remove_stale_tmp(self.options.results_path)
        leftover = sweep_state.stop_leftovers(self.options.results_path)
        previous = {} if self.options.force else self.results.measured(self.options.fingerprint)
        if previous:
            # Every launch so far, re-measures included (a strategy pools them), in file order.
            for line in self.results.read():
                launched = results_contract.is_launched(line.get("status"))
                if (
                    launched
                    and line.get("config_id") in previous
                    and line.get("stack_fingerprint") == self.options.fingerprint
                ):
                    self.scores.record(line)
        self._record_unlaunchable(previous)

        order = strategies.run_order(
            self.options.strategy,
            self.plan,
            self.scores,
            self.options.matrix.get("axes") or {},
            self.options.matrix.get("baseline"),
            prior=prior_scores(self.options.prior, self.plan),
        )
        planned = len(self.plan["launches"]) - len(previous)
        try:
            progress = sweep_state.Progress(self.options.results_path, self.options.run_id, planned)
        except sweep_state.WriteFailed as exc:
            raise SweepFailed(str(exc)) from None
        signal.signal(signal.SIGTERM, _raise_cancelled)
        error = None
        try:
            for config_id in order:
                # A strategy that re-measures (adaptive) names only what it still needs.
                if config_id in previous and self.options.strategy not in strategies.REMEASURING:
                    continue
                started = time.monotonic()
                line = self.launch(self.configs[config_id], progress)
                self._record(line)
                self.launches += 1
                progress.config_done(line["status"] != "ok", time.monotonic() - started)
        except Cancelled:
            error = "cancelled: the sweep was stopped; %d configs finished are in %s" % (
                self.launches,
                self.options.results_path,
            )
        except sweep_state.WriteFailed as exc:
            raise SweepFailed(
                "%s; the %d configs finished before are in %s"
                % (exc, self.launches, self.options.results_path),
                partial=self._partial(),
            ) from None
        outcome = self.outcome(previous, leftover, error)
        try:
            progress.finish(outcome)
        except sweep_state.WriteFailed as exc:
            raise SweepFailed(str(exc), partial=outcome) from None
        return outcome

    def _partial(self) -> Dict[str, Any]:
        return {"results": self.lines}

    def _record_unlaunchable(self, previous: Dict[str, Any]) -> None:
        """Pruned and duplicate configs get their line once, so the results file is the whole plan."""
        recorded = self.results.config_ids(self.options.run_id)
        for config in self.plan["configs"]:
            if config["status"] in results_contract.NOT_LAUNCHED and config["id"] not in recorded:
                if config["status"] == "pruned":
                    message = "; ".join(reason["message"] for reason in config.get("reasons", []))
                else:
                    message = "same launch as %s" % config.get("duplicate_of")
                failure = {"class": config["status"], "message": message, "log_tail": []}
                self._record(
                    self._line(
                        config, config["status"], failure=failure, duplicate_of=config.get("duplicate_of")
                    )
                )

    def outcome(self, previous: Dict[str, Any], leftover: Any, error: Optional[str]) -> Dict[str, Any]:
        lines = list(previous.values()) + self.lines
        counts: Dict[str, int] = {}
        for line in lines:
            counts[line["status"]] = counts.get(line["status"], 0) + 1
        best_id = self.scores.best([line["config_id"] for line in lines])
        best = self.scores.results.get(best_id) if best_id is not None else None
        valid = len(self.plan["launches"])
        summary = {
            "run_id": self.options.run_id,
            "strategy": self.options.strategy,
            "planned_configs": len(self.plan["configs"]),
            "valid_configs": valid,
            "launches": self.launches,
            "resumed": len(previous),
            "saved_launches": max(valid - self.launches - len(previous), 0),
            "screened_out": sum(1 for line in self.lines if line.get("screened_out")),
            "by_status": counts,
            "objective": {
                "workload": self.objective.workload,
                "metric": self.objective.metric,
                "goal": self.objective.goal,
            },
            "simulated": self.options.simulated,
            "leftover_stopped": leftover,
            "results_path": self.options.results_path,
        }
        return {"results": lines, "best": best, "summary": summary, "error": error}

    # -- one launch ---------------------------------------------------------------------

    def launch(self, config: Dict[str, Any], progress: sweep_state.Progress) -> Dict[str, Any]:
        """Start, measure and stop one config; a lost port race starts it again on another port."""
        port = self.options.port
        for _attempt in range(PORT_ATTEMPTS):
            port = _free_port(self.options.host, port)
            line = self._launch_once(config, progress, port)
            if line is not None:
                return line
            port += 1
        raise SweepFailed(
            "config %s: another process took the chosen port %d times in a row (last %d); "
            "is another sweep or server starting on this node?" % (config["id"], PORT_ATTEMPTS, port - 1),
            partial=self._partial(),
        )

    def _launch_once(
        self, config: Dict[str, Any], progress: sweep_state.Progress, port: int
    ) -> Optional[Dict[str, Any]]:
        """One start of a config's server; None when it lost its port to another process."""
        options = self.options
        argv = [*options.launch_command, *config.get("argv", [])]
        argv += ["--host", options.host, "--port", str(port)]
        if options.api_key:
            argv += ["--api-key", options.api_key]
        log_path = os.path.join(options.log_dir, "%s.log" % config["id"])
        started_at = _now()
        timings: Dict[str, float] = {}
        progress.phase(config["id"], "starting")
        marker = options.results_path
        # Recorded before the start, so a kill at any moment leaves a record to find the server
        # by (its environment carries the marker); completed with its pid once it runs.
        before = {"config_id": config["id"], "host": options.host, "port": port, "log_path": log_path}
        _writing(self.results.inflight_path, self.results.mark_inflight, dict(before, marker=marker))
        env = options.launch_env(marker)
        clock = time.monotonic()
        try:
            server = launcher.start_server(argv, host=options.host, port=port, log_path=log_path, env=env)
        except OSError as exc:
            raise SweepFailed(
                "cannot start the server of config %s (log %s): %s" % (config["id"], log_path, exc),
                partial=self._partial(),
            ) from None
        line: Optional[Dict[str, Any]] = None
        lost_port = False
        write_error: Optional[sweep_state.WriteFailed] = None
        try:
            _writing(
                self.results.inflight_path,
                self.results.mark_inflight,
                dict(server.record(), config_id=config["id"], marker=marker),
            )
            line = self._measure(config, server, port, progress, timings, clock)
            lost_port = line is None
        finally:
            # Stopping the server comes first and depends on no write: a full disk must not
            # leave it running.
            try:
                progress.phase(config["id"], "stopping")
            except sweep_state.WriteFailed as exc:
                write_error = exc
            clock = time.monotonic()
            try:
                stop = launcher.stop_server(
                    server,
                    grace_s=options.stop_grace_s,
                    release_timeout_s=options.release_timeout_s,
                    check_port=not lost_port,
                )
            except launcher.OrphanError as exc:
                raise SweepFailed(
                    "the server of config %s did not go away after its stop: %s" % (config["id"], exc),
                    partial=self._partial(),
                ) from exc
            timings["stop_s"] = round(time.monotonic() - clock, 3)
            # The server is gone; a stale record finds nothing and is replaced at the next launch.
            with contextlib.suppress(OSError):
                self.results.clear_inflight()
        if write_error is not None:
            raise write_error
        if line is None:
            return None
        line.update(
            started_at=started_at,
            timings=timings,
            release={"forced": stop.forced, "gpu": stop.gpu_check},
            cold_start=server.cold_start.as_dict(),
        )
        return line

    def _measure(
        self,
        config: Dict[str, Any],
        server: Any,
        port: int,
        progress: sweep_state.Progress,
        timings: Dict[str, float],
        clock: float,
    ) -> Optional[Dict[str, Any]]:
        """The config's line; None when its server lost its port to another process."""
        options = self.options
        health = launcher.wait_healthy(server, timeout_s=options.startup_timeout_s, api_key=options.api_key)
        timings["startup_s"] = round(time.monotonic() - clock, 3)
        if not health.ok:
            if server.exit_code() is not None and launcher.address_in_use(launcher.log_tail(server.log_path)):
                return None
            return self._failed(config, server, health.failure_class or "crashed", health.message)

        progress.phase(config["id"], "gate")
        clock = time.monotonic()
        gate = correctness.run_gate(options.host, port, reference=self.reference, api_key=options.api_key)
        if gate.first_answer_at is not None:
            server.cold_start.mark("first_token", gate.first_answer_at)
        timings["gate_s"] = round(time.monotonic() - clock, 3)
        if not gate.passed:
            if _exit_code(server, DEATH_GRACE_S) is not None:
                return self._failed(config, server, "crashed", "server exited during the correctness gate")
            return self._failed(config, server, "wrong-output", gate.message)
        if self.reference is None:
            self.reference = gate.outputs

        metrics: Dict[str, Any] = {}
        clock = time.monotonic()
        workloads = self.workloads[config["id"]]
        if strategies.needs_screen(options.strategy, self.scores, config["id"]):
            workloads = [self.screen_workload(workloads), *workloads]
        for n, workload in enumerate(workloads, 1):
            progress.phase(config["id"], "workload", n, len(workloads))
            samples: List[Dict[str, Any]] = []
            try:
                metrics[workload["name"]] = bench_client.run_workload(
                    options.host,
                    port,
                    bench_client.Workload.from_dict(workload),
                    api_key=options.api_key,
                    output_samples=samples,
                )
            except Exception as exc:  # a server that dies mid-benchmark is the config's failure
                if _exit_code(server, DEATH_GRACE_S) is not None:
                    return self._failed(
                        config,
                        server,
                        "crashed",
                        "server exited during workload %s: %s" % (workload["name"], exc),
                    )
                raise
            failed = any(rep.get("failed") for rep in metrics[workload["name"]].get("repetitions", []))
            if _exit_code(server, DEATH_GRACE_S if failed else 0.0) is not None:
                return self._failed(
                    config, server, "crashed", "server exited during workload %s" % workload["name"]
                )
            wrong = self.output_audit.check(samples)
            if wrong is not None:
                return self._failed(config, server, "wrong-output", wrong)
            if workload["name"] == SCREEN and not self._screen_passes(metrics[SCREEN]):
                timings["bench_s"] = round(time.monotonic() - clock, 3)
                return self._line(config, "ok", metrics=metrics, screened_out=True)
        timings["bench_s"] = round(time.monotonic() - clock, 3)
        accept = [m.get("values", {}).get("accept_length") for m in metrics.values()]
        accept = [a for a in accept if a is not None]
        return self._line(config, "ok", metrics=metrics, accept_length=accept[0] if accept else None)

    def screen_workload(self, workloads: List[Dict[str, Any]]) -> Dict[str, Any]:
        """A short version of the objective's workload: same shape, fewer and shorter requests."""
        return strategies.screen_workload(workloads, self.objective.workload)

    def _screen_passes(self, screen_metrics: Dict[str, Any]) -> bool:
        """Full workloads only for a screen not worse than the best recorded (resumed lines too)."""
        return strategies.screen_gate(self.scores, screen_metrics)

    def _failed(
        self, config: Dict[str, Any], server: Any, failure_class: str, message: str
    ) -> Dict[str, Any]:
        secrets = self.options.secrets()
        failure = {
            "class": failure_class,
            "message": _redact(message, secrets),
            "log_tail": [_redact(line, secrets) for line in launcher.log_tail(server.log_path, 50)],
        }
        return self._line(config, failure_class, failure=failure)


def _redact(text: str, secrets: List[str]) -> str:
    """A server may print its own arguments (SGLang logs server_args): keep secrets out of results."""
    for secret in secrets:
        text = text.replace(secret, "********")
    return text


def _writing(path: str, write: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a write on the node; an OSError becomes a SweepFailed naming the path."""
    try:
        return write(*args, **kwargs)
    except OSError as exc:
        raise SweepFailed("cannot write %s: %s" % (path, exc.strerror or exc)) from None


def _exit_code(server: Any, grace_s: float) -> Optional[int]:
    """The server's exit code, giving a dying one up to grace_s to be seen dead; None if it runs."""
    deadline = time.monotonic() + grace_s
    while True:
        code = server.exit_code()
        if code is not None or time.monotonic() >= deadline:
            return code
        time.sleep(0.05)


def _lock_results(results_path: str) -> int:
    """Hold the results file for this sweep: a second sweep on it would stop our servers.

    The lock is the kernel's (flock), so it goes with the process, killed or not.
    """
    try:
        fd = sweep_state.hold_results(results_path)
    except OSError as exc:
        raise SweepFailed(
            "cannot write %s: %s" % (exc.filename or results_path, exc.strerror or exc)
        ) from None
    if fd is None:
        progress = sweep_state.read_progress(results_path) or {}
        run_id = progress.get("run_id") or os.path.basename(os.path.dirname(results_path))
        raise SweepFailed(
            "run %s is still running on this node (sweep pid %s, results %s): follow it, or "
            "cancel it (bwtune cancel %s), before you start it again"
            % (run_id, progress.get("pid") or "unknown", results_path, run_id)
        )
    return fd


def _lock_node(options: SweepOptions) -> int:
    """One sweep per node: a second one would race ours for ports and GPU memory."""
    holder = {
        "run_id": options.run_id,
        "pid": os.getpid(),
        "results_path": options.results_path,
        "started_at": _now(),
    }
    try:
        fd, other = sweep_state.hold_node(options.node_lock_path, holder)
    except OSError as exc:
        raise SweepFailed("cannot write %s: %s" % (options.node_lock_path, exc.strerror or exc)) from None
    if fd is None:
        raise SweepFailed(
            "another sweep is running on this node: run %s (sweep pid %s, since %s, results %s); "
            "a node runs one sweep at a time (its servers would race for ports and GPU memory): "
            "wait for it or cancel it (bwtune cancel %s)"
            % (
                other.get("run_id", "?"),
                other.get("pid", "?"),
                other.get("started_at", "?"),
                other.get("results_path", "?"),
                other.get("run_id", "RUN"),
            )
        )
    return fd


def _raise_cancelled(signum: int, frame: Any) -> None:
    raise Cancelled()


def run_sweep(options: SweepOptions, the_plan: Dict[str, Any]) -> Dict[str, Any]:
    return Sweep(options, the_plan).run()
