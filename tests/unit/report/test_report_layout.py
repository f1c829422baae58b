"""Issue 20 #25: the host_vars block inside its card, evenly labelled axis ticks centred on
their grid lines, plan decisions (pruned, duplicate) not badged like failures, and the GPU
facts a sweep gathered in the report."""

from __future__ import annotations

import itertools
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from headless import FLAGS, chromium
from sample_results import sample_results

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import ansible_run, results_db
from bwtune.app import sweep_service
from bwtune.commands import sweep_command as sweep
from bwtune.report import svg
from bwtune.report.regression_chart import history_chart

# Measured in the page at a desktop width: how far each <pre> of the winner's cards reaches
# past its card (0 when it stays inside, scrolling its own long lines).
_MEASURE = """<script>
(function () {
  var out = [];
  document.querySelectorAll('#winner .grid2 pre').forEach(function (pre) {
    var card = pre.parentElement.getBoundingClientRect(), box = pre.getBoundingClientRect();
    var section = document.getElementById('winner').getBoundingClientRect();
    out.push(pre.id + ':' + Math.round(Math.max(box.right - card.right, card.right - section.right, 0)));
  });
  document.body.dataset.overflow = out.join(',');
})();
</script></body>"""


@pytest.mark.browser
def test_the_launch_command_and_host_vars_stay_inside_their_cards(rendered, tmp_path: Path) -> None:
    html = rendered[0].read_text(encoding="utf-8")
    # A long value, as a real checkpoint path or speculative config gives.
    html = html.replace("bwtune_model_path: ", "bwtune_model_path: /very/long/" + "checkpoint-dir/" * 20, 1)
    page = tmp_path / "page.html"
    page.write_text(html.replace("</body>", _MEASURE, 1), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="bwtune-chromium-") as profile:
        proc = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", "--window-size=1400,2000",
             "--virtual-time-budget=3000", "--dump-dom", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    match = re.search(r'data-overflow="([^"]*)"', proc.stdout)
    assert match is not None, proc.stdout[:2000]
    assert match.group(1) == "launch-cmd:0,host-vars:0"


def test_tick_labels_carry_the_decimals_of_their_step() -> None:
    ticks = svg.nice_ticks(1000.0, 1009.0, 4)
    labels = svg.tick_labels(ticks)
    values = [float(label.replace(",", "")) for label in labels]
    assert values == pytest.approx(ticks)  # 1,002.5 not 1,002: evenly spaced labels
    assert len(set(labels)) == len(labels)
    assert svg.tick_labels([0.0, 500.0, 1000.0]) == ["0", "500", "1,000"]


def test_history_chart_labels_sit_on_their_grid_lines_at_any_font_size() -> None:
    config = {
        "config_id": "c1",
        "gpu": "sm120",
        "history": [{"run_id": f"r{i}", "level": 1000.0 + 2.0 * i} for i in range(5)],
        "change_points": [],
    }
    chart = history_chart(config, None, metric="output_throughput", simulated=False)
    lines = [float(y) for y in re.findall(r'<line x1="70" x2="620" y1="([\d.]+)"', chart)]
    labels = re.findall(
        r'<text x="64.0" y="([\d.]+)"[^>]*dominant-baseline="central"[^>]*>([^<]+)</text>', chart
    )
    assert lines and [float(y) for y, _ in labels] == lines
    values = [float(text.replace(",", "")) for _, text in labels]
    assert len({round(b - a, 6) for a, b in itertools.pairwise(values)}) == 1, labels


def test_pruned_and_duplicate_badges_are_not_failure_red(rendered) -> None:
    html = rendered[0].read_text(encoding="utf-8")
    badges = re.findall(r'<span class="status (\w+)">([\w-]+)</span>', html)
    by_status = {status: kind for kind, status in badges}
    assert by_status["duplicate"] == by_status["pruned"] == "plan"
    assert by_status["oom"] == by_status["crashed"] == by_status["wrong-output"] == "bad"
    assert by_status["ok"] == "ok"
    assert len({kind for kind, status in badges if status == "duplicate"}) == 1  # every duplicate row


def test_a_sweeps_gathered_gpu_facts_reach_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    host, run_id = "gpu-a", "r-facts"
    lines = [line for line in sample_results(run_id) if line["host"] == host]
    bwtune_gpu: dict[str, Any] = {
        "available": True, "message": "8 x NVIDIA RTX PRO 6000 Blackwell Server Edition", "count": 8,
        "sm": "sm120", "driver_version": "580.159.04", "cuda_version": "13.0", "interconnect": "pcie",
        "gpus": [{"index": 0, "memory_total_mib": 97887, "processes": []}],
    }  # fmt: skip
    run = ansible_run.PlaybookRun(playbook=Path("sweep.yml"), private_data_dir=tmp_path / "pdd", ident="x")
    run.artifact_data = {"bwtune_sweep": {host: {"results": lines}}}
    run.stats = {"ok": {host: 5}}
    run.rc = 0
    run.ok.append(ansible_run.RunnerEvent("ok", host, "Gather GPU facts", "bwtune.sglang.gpu_facts",
                                     {"ansible_facts": {"bwtune_gpu": bwtune_gpu}}, {}))  # fmt: skip
    inventory = ansible_run.Inventory(path=Path("/inv.yml"), hostvars={host: {}})
    request = sweep.SweepRequest(inventory=inventory, matrix={"model": {"path": "/m"}}, matrix_source="m.yml",
                                 run_id=run_id)  # fmt: skip
    done = sweep_service.collect(request, run)
    assert done.output is not None and [r["status"] for r in done.output["results"]].count(contract.OK) == 5
    conn = results_db.connect_readonly()
    try:
        [stored] = results_db.run_hosts(conn, run_id)
    finally:
        conn.close()
    assert stored["gpu_facts"] == {
        "gpus": bwtune_gpu["message"], "count": 8, "sm": "sm120", "memory_mib": 97887,
        "driver": "580.159.04", "cuda": "13.0", "interconnect": "pcie",
    }  # fmt: skip
    html = (results_db.run_dir(run_id) / "report.html").read_text(encoding="utf-8")
    stack = html[html.index('id="stack"') :]
    assert "8 x NVIDIA RTX PRO 6000 Blackwell Server Edition" in stack and "driver: 580.159.04" in stack
