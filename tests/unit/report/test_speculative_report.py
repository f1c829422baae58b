"""The report of a `bwtune speculative` run (issue 26): the section *Speculative decoding*,
per load MTP off against each setting with its accept length, and the winner at the target."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import results_db, store
from bwtune.analysis import speculative as spec_view
from bwtune.report import SIMULATED_LABEL, load_report, render_html, render_markdown

RUN_ID = "20261202T120000Z-5bec0001"
OBJECTIVE = {"workload": "c64", "metric": "output_throughput", "goal": "max"}
OFF = {"tp-size": 8, "moe-runner-backend": "flashinfer_cutlass"}
ON3 = {
    **OFF,
    "speculative-algorithm": "EAGLE",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 1,
    "speculative-num-draft-tokens": 4,
}


def block(name: str, concurrency: int, value: float, accept: float | None) -> dict[str, Any]:
    values = {"output_throughput": value, "accept_length": accept}
    return {
        "n": 1,
        "values": values,
        "ci95": {},
        "cv": {},
        "repetitions": [values],
        "workload": {"name": name, "concurrency": concurrency},
    }


def result(cid: str, flags: dict[str, Any], c8: float, c64: float, accept: float | None) -> dict[str, Any]:
    metrics = {"c8": block("c8", 8, c8, accept), "c64": block("c64", 64, c64, accept and accept - 0.4)}
    return contract.make_line(
        run_id=RUN_ID,
        host="node1",
        config_id=cid,
        status="ok",
        flags=flags,
        metrics=metrics,
        simulated=True,
        objective=OBJECTIVE,
        point={"speculative": cid},
    )


@pytest.fixture
def conn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    c = results_db.connect(tmp_path / "r.db")
    results_db.record_run(c, RUN_ID, objective=OBJECTIVE)
    results_db.import_results(
        c, [result("coff0000001", OFF, 380.0, 1190.0, None), result("con30000001", ON3, 660.0, 810.0, 2.84)]
    )
    yield c
    c.close()


def link(tmp_path: Path) -> None:
    folder = store.run_dir(RUN_ID)
    folder.mkdir(parents=True)
    record = {
        "base_run": "20261201T000000Z-base0001",
        "settings": {"off": {}, "s3k1d4": {}},
        "base_config": {"id": "cbase", "host": "node1", "setting": "off"},
        "dropped": [],
    }
    (folder / spec_view.LINK_FILE).write_text(json.dumps(record))


def test_a_stage_run_has_the_section_with_the_verdict_and_accept_length(conn, tmp_path: Path) -> None:
    link(tmp_path)
    data = load_report(conn, RUN_ID)
    md = render_markdown(data)
    section = md.split("## Speculative decoding")[1].split("\n## ")[0]
    assert section.startswith(f" — **{SIMULATED_LABEL}**")
    assert "run `20261201T000000Z-base0001`'s winner `cbase`" in section
    assert "**At the target load (concurrency 64): off.**" in section
    assert "MTP wins at: concurrency 8." in section and "MTP loses at: concurrency 64." in section
    assert "off wins: the best MTP setting loses 32%" in section
    assert "on (EAGLE steps=3, topk=1, draft=4) wins by 74%" in section
    assert "(accept 2.84)" in section and "(accept 2.44)" in section
    html = render_html(data)
    found = re.search(r'<section id="speculative">.*?</section>', html, flags=re.S)
    assert found and "At the target load (concurrency 64): off." in found.group(0)
    assert ">2.84<" in found.group(0) and SIMULATED_LABEL in found.group(0)


def test_another_run_has_no_such_section(conn) -> None:
    data = load_report(conn, RUN_ID)
    assert data.speculative_link is None
    assert "## Speculative decoding" not in render_markdown(data)
    assert 'id="speculative"' not in render_html(data)
