"""The cold-start breakdown: measured by the launcher, a checked field of the results line,
carried by the database to export and the report (marked simulated when it is)."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from ansible_collections.bwtune.sglang.plugins.module_utils._server import launcher
from bwtune import results_db
from bwtune.report import load_report, render_html, render_markdown

FAKE = str(Path(__file__).parent / "sweep_parts" / "fake_server.py")
RUN = "r-cold"


def line(config_id: str = "c0000000001", status: str = "ok", **fields: Any) -> dict[str, Any]:
    failure = None if status == "ok" else contract.make_failure(status, "it failed")
    base: dict[str, Any] = {
        "run_id": RUN,
        "host": "gpu-a",
        "config_id": config_id,
        "status": status,
        "failure": failure,
        "gpu": "sm120",
        "flags": {"cuda-graph-max-bs": int(config_id[-1]) * 8},
    }
    return contract.make_line(**{**base, **fields})


COLD = {
    "process_to_listen_s": 1.5,
    "to_health_s": 181.0,
    "to_ready_s": 272.25,
    "to_first_token_s": 273.5,
    "failed_after_s": None,
    "reached": "first_token",
}
FAILED_COLD = {**{k: None for k in contract.COLD_START_SECONDS}, "failed_after_s": 95.0, "reached": "started"}


# ---------------------------------------------------------------- the launcher's clock


def test_a_phase_keeps_its_first_time_and_implies_the_earlier_ones() -> None:
    cold = launcher.ColdStart(started=100.0)
    assert cold.as_dict()["reached"] == "started"
    cold.mark("health", at=103.0)  # seen healthy at the first answer: it was listening then too
    cold.mark("listening", at=104.0)
    cold.mark("ready", at=110.5)
    cold.mark("ready", at=111.0)
    assert cold.as_dict() == {
        "process_to_listen_s": 3.0,
        "to_health_s": 3.0,
        "to_ready_s": 10.5,
        "to_first_token_s": None,
        "failed_after_s": None,
        "reached": "ready",
    }
    with pytest.raises(ValueError, match="unknown cold-start phase 'started'"):
        cold.mark("started")


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Start fake_server.py (listens only after --delay, like SGLang after its load); killed after."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no nvidia-smi: the stop skips the GPU check
    handles: list[launcher.ServerHandle] = []

    def start(*opts: str) -> launcher.ServerHandle:
        port = _port()
        argv = [sys.executable, FAKE, "--port", str(port), *opts]
        handle = launcher.start_server(argv, port=port, log_path=str(tmp_path / f"{port}.log"))
        handles.append(handle)
        return handle

    yield start
    for handle in handles:
        for pid in launcher.group_members(handle.pgid, handle.pid, handle.start_ticks) | {handle.pid}:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        if handle.proc is not None:
            handle.proc.wait()


def test_wait_healthy_records_how_long_the_load_took(fake_server) -> None:
    server = fake_server("--mode", "healthy", "--delay", "0.6")
    health = launcher.wait_healthy(server, timeout_s=30, poll_s=0.05)
    assert health.ok
    cold = server.cold_start.as_dict()
    assert cold["reached"] == "ready" and cold["failed_after_s"] is None
    # Nothing answers before the simulated load ends: each phase is at least that late.
    assert 0.6 <= cold["process_to_listen_s"] <= cold["to_health_s"] <= cold["to_ready_s"]
    launcher.stop_server(server, grace_s=5)


def test_a_launch_that_dies_in_its_load_records_how_far_it_got(fake_server) -> None:
    server = fake_server("--mode", "oom", "--delay", "0.3")
    health = launcher.wait_healthy(server, timeout_s=30, poll_s=0.05)
    given_up = time.monotonic()
    assert not health.ok and health.failure_class == "oom"
    cold = server.cold_start.as_dict()
    assert cold["reached"] == "started"
    assert cold["process_to_listen_s"] is None and cold["to_ready_s"] is None
    # It died after its simulated load, and the launcher saw it before wait_healthy returned.
    assert cold["failed_after_s"] >= 0.3
    assert server.cold_start.failed is not None and server.cold_start.failed <= given_up
    launcher.stop_server(server, grace_s=5, check_port=False)


# ---------------------------------------------------------------- the contract


def test_lines_with_and_without_a_cold_start_are_valid() -> None:
    contract.validate_line(line(cold_start=COLD))
    contract.validate_line(line("c0000000002", "oom", cold_start=FAILED_COLD))
    old = line()
    del old["cold_start"]  # a line of an older node
    contract.validate_line(old)


@pytest.mark.parametrize(
    ("cold_start", "message"),
    [
        ([1.0], "cold_start must be an object or null"),
        ({**COLD, "to_health_s": -1.0}, "cold_start.to_health_s must be seconds"),
        ({**COLD, "to_ready_s": "272"}, "cold_start.to_ready_s must be seconds"),
        ({**COLD, "to_first_token_s": True}, "cold_start.to_first_token_s must be seconds"),
        ({**COLD, "reached": "warm"}, "cold_start.reached must be one of started, listening"),
    ],
)
def test_a_bad_cold_start_is_refused_naming_the_field(cold_start: Any, message: str) -> None:
    with pytest.raises(contract.ResultsFormatError, match=message):
        contract.validate_line(line(cold_start=cold_start), "results.jsonl:3")


# ---------------------------------------------------------------- database, export, report


@pytest.fixture
def db(tmp_path: Path):
    conn = results_db.connect(tmp_path / "results.db")
    yield conn
    conn.close()


def _store(conn, simulated: bool) -> None:
    old = line("c0000000003", simulated=simulated)
    del old["cold_start"]
    results_db.import_results(
        conn,
        [
            line("c0000000001", cold_start=COLD, simulated=simulated),
            line("c0000000002", "oom", cold_start=FAILED_COLD, simulated=simulated),
            old,
        ],
    )
    results_db.record_run(conn, RUN, objective={"workload": "chat", "metric": "output_throughput"})


def test_export_carries_the_cold_start_and_null_for_older_lines(db) -> None:
    _store(db, simulated=False)
    results = {r["id"]: r for r in results_db.build_run_output(db, RUN)["results"]}
    assert results["c0000000001"]["cold_start"] == COLD
    assert results["c0000000002"]["cold_start"] == FAILED_COLD
    assert results["c0000000003"]["cold_start"] is None


def _cold_section(markdown: str) -> str:
    return markdown.split("## Cold start per launch")[1].split("\n## ")[0]


@pytest.mark.parametrize("simulated", [True, False])
def test_the_report_shows_each_launch_cold_start_marked_simulated_when_it_was(db, simulated: bool) -> None:
    _store(db, simulated=simulated)
    data = load_report(db, RUN)
    section = _cold_section(render_markdown(data))
    assert ("SIMULATED (bwtune stand-in)" in section) is simulated
    rows = [row for row in section.splitlines() if row.startswith("| `c")]
    assert rows == [
        "| `c0000000001` | gpu-a | ok | first_token | 1.500 | 181.0 | 272.2 | 273.5 | \u2013 |",
        "| `c0000000002` | gpu-a | oom | started | \u2013 | \u2013 | \u2013 | \u2013 | 95.0 |",
    ]
    html = render_html(data)
    cold_html = html.split('id="cold-start"')[1].split("</section>")[0]
    assert ("SIMULATED (bwtune stand-in)" in cold_html) is simulated
    assert 'data-sort="272.25"' in cold_html and "c0000000003" not in cold_html


def test_a_run_without_cold_starts_says_so(db) -> None:
    old = line()
    del old["cold_start"]
    results_db.import_results(db, [old])
    section = _cold_section(render_markdown(load_report(db, RUN)))
    assert "No launch of this run recorded its cold start." in section
