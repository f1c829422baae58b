"""The regress_schedule role on a systemd-nspawn host, with a stand-in regression.

bwtune reaches the host as this checkout and its venv, bound in read-only at the same
paths (with the venv's interpreter): no install, and the host runs exactly the code under
test. One converge (a second changes nothing), then: the timer is active and scheduled;
a start while the lock is held is skipped (exit 75) and writes nothing; a manual start
runs `bwtune regress` (two launches: a sweep, then a forced resume) against the stand-in
on the host and writes every output (Markdown, JUnit XML, textfile, JSON, the report's
regression section); only the newest report folders are kept.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from junitparser import JUnitXml
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PYTHON_HOME = Path(sys.base_prefix)  # the venv's interpreter lives here
UNIT = "bwtune-regress"
REPORTS = "/var/lib/bwtune-regress/reports"
TEXTFILE = "/var/lib/node-exporter/bwtune_regression.prom"
LOCK = "/run/lock/bwtune-regress.lock"
MATRIX = f"""
model: {{path: {REPO}/examples/models/qwen35-397b-a17b-nvfp4, quantization: modelopt_fp4}}
hardware: {{gpu: sm120, count: 8}}
sglang: {{version: "0.5.23"}}
base: {{tp-size: 8, quantization: modelopt_fp4}}
axes: {{moe-runner-backend: [flashinfer_cutlass]}}
workloads:
  - {{name: chat, input_len: 64, output_len: 16, concurrency: 2, num_prompts: 2, repetitions: 2,
     estimate_s: 2}}
objective: {{workload: chat, metric: output_throughput, goal: max}}
"""
PLAY = """
- hosts: testhosts
  gather_facts: false
  pre_tasks:
    - ansible.builtin.copy: {content: "{{ matrix }}", dest: /etc/regression-test.yml, mode: "0644"}
  roles:
    - role: bwtune.sglang.regress_schedule
"""


@pytest.fixture(scope="module")
def host(make_testhosts: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    hosts = make_testhosts(1, bind_ro=(str(PYTHON_HOME), str(REPO)))
    work = tmp_path_factory.mktemp("regress-schedule")
    (work / "play.yml").write_text(PLAY)
    variables = {
        "matrix": MATRIX,
        "regress_schedule_bwtune": f"{REPO}/.venv/bin/bwtune",
        "regress_schedule_inventory": f"{REPO}/inventory/local.yml",
        "regress_schedule_matrix": "/etc/regression-test.yml",
        "regress_schedule_user": "root",  # the bound interpreter is under /root
        "regress_schedule_create_user": False,
        "regress_schedule_repetitions": 2,  # the second launch is a forced resume of the run
        "regress_schedule_keep_reports": 2,
        "regress_schedule_textfile": TEXTFILE,
        "regress_schedule_on_calendar": "*-*-* 04:00:00",
        "regress_schedule_environment": {"BWTUNE_STANDIN_STARTUP_SCALE": "0.002"},
        "ansible_pipelining": True,
    }
    done = hosts.playbook(work / "play.yml", "-e", json.dumps(variables))
    assert done.returncode == 0, done.stdout[-4000:]
    again = hosts.playbook(work / "play.yml", "-e", json.dumps(variables))
    assert again.returncode == 0 and re.search(r"changed=0\s", again.stdout), again.stdout[-3000:]
    return hosts


def _sh(hosts: Any, *argv: str, timeout: float = 120) -> str:
    done = hosts.ssh(hosts.names[0], *argv, timeout=timeout)
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return str(done.stdout)


def _service(hosts: Any) -> dict[str, str]:
    show = _sh(hosts, "systemctl", "show", f"{UNIT}.service", "-p", "Result", "-p", "ExecMainStatus")
    return dict(line.split("=", 1) for line in show.split())


def test_the_timer_is_active_and_scheduled(host: Any) -> None:
    assert _sh(host, "systemctl", "is-active", f"{UNIT}.timer").strip() == "active"
    assert _sh(host, "systemctl", "is-enabled", f"{UNIT}.timer").strip() == "enabled"
    show = _sh(
        host, "systemctl", "show", f"{UNIT}.timer", "-p", "NextElapseUSecRealtime", "-p", "TimersCalendar"
    )
    assert "04:00:00" in show
    assert "NextElapseUSecRealtime=" in show and "NextElapseUSecRealtime=\n" not in show


def test_a_start_while_the_lock_is_held_is_skipped(host: Any) -> None:
    # Another run holds the lock (a transient unit: it goes when stopped).
    _sh(host, "systemd-run", "--unit=lock-holder", "--collect", "flock", LOCK, "sleep", "300")
    _sh(host, "sh", "-c", f"for i in $(seq 50); do flock -n {LOCK} true || exit 0; sleep 0.1; done; exit 1")
    try:
        _sh(host, "systemctl", "start", f"{UNIT}.service")
        assert _service(host)["ExecMainStatus"] == "75"
        assert _sh(host, "ls", "-A", REPORTS).strip() == ""
    finally:
        _sh(host, "systemctl", "stop", "lock-holder")


def test_a_manual_start_runs_a_stand_in_regression_with_every_output(host: Any) -> None:
    # Two older report folders: with keep 2, the oldest goes after the run.
    _sh(host, "mkdir", "-p", f"{REPORTS}/20200101T000000Z", f"{REPORTS}/20210101T000000Z")
    _sh(host, "systemctl", "start", f"{UNIT}.service", timeout=300)
    state = _service(host)
    assert state["Result"] == "success" and state["ExecMainStatus"] == "0", _sh(
        host, "journalctl", "-u", f"{UNIT}.service", "--no-pager", "-n", "60"
    )
    folders = _sh(host, "ls", REPORTS).split()
    assert len(folders) == 2 and folders[0] == "20210101T000000Z"
    newest = f"{REPORTS}/{folders[1]}"
    assert sorted(_sh(host, "ls", newest).split()) == [
        "bwtune_regression.prom",
        "junit.xml",
        "regression.json",
        "regression.md",
    ]
    assert "bwtune regression run" in _sh(host, "cat", f"{newest}/regression.md")
    junit_path = Path(host.dir) / "junit.xml"
    junit_path.write_text(_sh(host, "cat", f"{newest}/junit.xml"))
    cases = [case for suite in JUnitXml.fromfile(str(junit_path)) for case in suite]
    assert [case.name for case in cases] == ["chat"]
    families = {f.name: f for f in text_string_to_metric_families(_sh(host, "cat", TEXTFILE))}
    assert families["bwtune_regression_regressed"].samples[0].value == 0
    assert families["bwtune_regression_objective"].samples[0].value > 0
    runs = _sh(host, "ls", "/var/lib/bwtune-regress/runs").split()
    assert len(runs) == 1
    # Two launches of the config: the current line and the one it superseded.
    count = (
        "import sys; from bwtune import results_db as d; c = d.connect(sys.argv[1]); "
        "print(len(d.run_results(c, sys.argv[2])), len(d.superseded_results(c, sys.argv[2])))"
    )
    launches = _sh(
        host, f"{REPO}/.venv/bin/python", "-c", count, "/var/lib/bwtune-regress/results.db", runs[0]
    )
    assert launches.split() == ["1", "1"]
    html = _sh(host, "cat", f"/var/lib/bwtune-regress/runs/{runs[0]}/report.html")
    assert 'id="regression"' in html and "SIMULATED" in html
