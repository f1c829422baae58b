# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""One launch of a config: start its server, wait healthy, gate, run the workloads, stop, its line."""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import bench_client, correctness
from ansible_collections.bwtune.sglang.plugins.module_utils._search import strategy_screening
from ansible_collections.bwtune.sglang.plugins.module_utils._server import launcher
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_state
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_core import SCREEN, SweepCore, now
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_failures import SweepFailed, writing

# A crashing server's sockets close before the kernel reports the process dead, so a client
# sees the broken connection first: after errors, wait this long before calling it alive.
DEATH_GRACE_S = 2.0
# A launch whose port another process took before the server bound it is started again on
# the next free port, this many times at most (then the sweep stops: the node is too busy).
PORT_ATTEMPTS = 5


def _free_port(host: str, first: int) -> int:
    for port in range(first, first + 200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    raise SweepFailed("no free port between %d and %d on %s" % (first, first + 199, host))


class ConfigLaunch(SweepCore):
    """One launch of a config: start, wait healthy, gate, workloads, stop, its line."""

    # -- one launch ---------------------------------------------------------------------

    def launch(self, config: dict[str, Any], progress: sweep_state.Progress) -> dict[str, Any]:
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
        self, config: dict[str, Any], progress: sweep_state.Progress, port: int
    ) -> dict[str, Any] | None:
        """One start of a config's server; None when it lost its port to another process."""
        options = self.options
        argv = [*options.launch_command, *config.get("argv", [])]
        argv += ["--host", options.host, "--port", str(port)]
        if options.api_key:
            argv += ["--api-key", options.api_key]
        log_path = launcher.launch_log_path(options.log_dir, config["id"])
        started_at = now()
        timings: dict[str, float] = {}
        progress.phase(config["id"], "starting")
        marker = options.results_path
        # Recorded before the start, so a kill at any moment leaves a record to find the server
        # by (its environment carries the marker); completed with its pid once it runs.
        before = {"config_id": config["id"], "host": options.host, "port": port, "log_path": log_path}
        writing(self.results.inflight_path, self.results.mark_inflight, dict(before, marker=marker))
        env = options.launch_env(marker)
        clock = time.monotonic()
        try:
            server = launcher.start_server(
                argv, host=options.host, port=port, log_path=log_path, env=env, secrets=options.secrets()
            )
        except OSError as exc:
            raise SweepFailed(
                "cannot start the server of config %s (log %s): %s" % (config["id"], log_path, exc),
                partial=self._partial(),
            ) from None
        line: dict[str, Any] | None = None
        lost_port = False
        write_error: sweep_state.WriteFailed | None = None
        try:
            writing(
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
        config: dict[str, Any],
        server: Any,
        port: int,
        progress: sweep_state.Progress,
        timings: dict[str, float],
        clock: float,
    ) -> dict[str, Any] | None:
        """The config's line; None when its server lost its port to another process."""
        options = self.options
        health = launcher.wait_healthy(server, timeout_s=options.startup_timeout_s, api_key=options.api_key)
        timings["startup_s"] = round(time.monotonic() - clock, 3)
        if not health.ok:
            # Its own log's bind error for this port, wherever in the tail it is (whether the
            # server has exited yet or not), or another process answering on the port while
            # this one loads: a lost race, started again on another port.
            if health.failure_class == launcher.PORT_TAKEN or launcher.lost_port(server.log_path, port):
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

        metrics: dict[str, Any] = {}
        clock = time.monotonic()
        workloads = self.workloads[config["id"]]
        if strategy_screening.needs_screen(options.strategy, self.scores, config["id"]):
            workloads = [self.screen_workload(workloads), *workloads]
        for n, workload in enumerate(workloads, 1):
            progress.phase(config["id"], "workload", n, len(workloads))
            samples: list[dict[str, Any]] = []
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

    def _failed(
        self, config: dict[str, Any], server: Any, failure_class: str, message: str
    ) -> dict[str, Any]:
        secrets = self.options.secrets()
        failure = {
            "class": failure_class,
            "message": _redact(message, secrets),
            "log_tail": [_redact(line, secrets) for line in launcher.log_tail(server.log_path, 50)],
            "log_path": server.log_path,  # on the node; each start has its own
        }
        return self._line(config, failure_class, failure=failure)


def _redact(text: str, secrets: list[str]) -> str:
    """A server may print its own arguments (SGLang logs server_args): keep secrets out of results."""
    for secret in secrets:
        text = text.replace(secret, "********")
    return text


def _exit_code(server: Any, grace_s: float) -> int | None:
    """The server's exit code, giving a dying one up to grace_s to be seen dead; None if it runs."""
    deadline = time.monotonic() + grace_s
    while True:
        code = server.exit_code()
        if code is not None or time.monotonic() >= deadline:
            return code
        time.sleep(0.05)
