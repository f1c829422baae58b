"""The adaptive prior reads earlier runs of the same hardware (bwtune.analysis.hardware_group,
same_hardware): a 4-GPU host's scores never steer a sweep of 8-GPU hosts of the same SM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.planner import plan as make_real_plan
from bwtune import results_db
from bwtune.app import sweep_service

ROOT = Path(__file__).resolve().parents[3]
MATRIX = yaml.safe_load((ROOT / "examples" / "qwen35-397b-nvfp4-sm120.yml").read_text())
IDS = [launch["config"] for launch in make_real_plan(MATRIX, gpu="sm120").to_dict()["launches"]]


def line(run: str, host: str, config_id: str, value: float) -> dict[str, Any]:
    metrics = {"single": {"n": 1, "values": {"output_tok_s_per_request": value}}}
    return results_contract.make_line(
        run_id=run, host=host, config_id=config_id, status="ok", flags={}, stack_fingerprint="fp1",
        gpu="sm120", metrics=metrics, finished_at=f"2026-11-30T1{run[-1]}:00:00",
    )  # fmt: skip


def keep_gpus(conn: Any, run: str, host: str, count: int) -> None:
    facts = {"available": True, "message": f"{count} x NVIDIA RTX PRO 6000", "count": count, "sm": "sm120"}
    results_db.record_host_facts(conn, run, host, gpu_facts=results_db.gpu_facts_summary(facts))


def request(hosts: list[str]) -> sweep_service.SweepRequest:
    inventory = type("Inventory", (), {"hosts": hosts, "hostvars": {h: {} for h in hosts}})()
    return sweep_service.SweepRequest(
        inventory=inventory, matrix=MATRIX, matrix_source="m.yml", run_id="r3", strategy="adaptive"
    )  # type: ignore[arg-type]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("BWTUNE_DB", str(tmp_path / "results.db"))
    conn = results_db.connect()
    # r1: the inventory's host n1, 8 GPUs. r2 (newer): a 4-GPU host of the same SM and stack.
    for run in ("r1", "r2"):
        results_db.record_run(conn, run, created_at=f"2026-11-30T1{run[-1]}:00:00+00:00")
    results_db.import_results(conn, [line("r1", "n1", IDS[0], 10.0)])
    keep_gpus(conn, "r1", "n1", 8)
    results_db.import_results(conn, [line("r2", "small", IDS[0], 99.0), line("r2", "small", IDS[1], 50.0)])
    keep_gpus(conn, "r2", "small", 4)
    yield conn
    conn.close()


def test_a_4_gpu_hosts_scores_are_not_the_prior_of_an_8_gpu_inventory(db: Any) -> None:
    # With the SM alone as the group, r2's 99.0 and 50.0 would be the prior.
    assert sweep_service.read_prior(request(["n1"])) == [{"config": IDS[0], "score": 10.0}]


def test_the_4_gpu_inventory_reads_the_4_gpu_runs(db: Any) -> None:
    prior = sweep_service.read_prior(request(["small"]))
    assert prior == sorted(
        [{"config": IDS[0], "score": 99.0}, {"config": IDS[1], "score": 50.0}], key=lambda e: e["config"]
    )


def test_a_resume_reads_the_same_prior_whatever_this_run_kept_since(db: Any) -> None:
    first = sweep_service.read_prior(request(["n1"]))
    # This run's own facts (kept by its first start; say the host lost GPUs since) do not count.
    results_db.record_run(db, "r3", created_at="2026-11-30T13:00:00+00:00")
    keep_gpus(db, "r3", "n1", 4)
    assert sweep_service.read_prior(request(["n1"])) == first


def test_an_inventory_of_hosts_that_disagree_or_were_never_seen_falls_back_to_the_sm(db: Any) -> None:
    both = sweep_service.read_prior(request(["n1", "small"]))
    unseen = sweep_service.read_prior(request(["new"]))
    assert both == unseen
    assert {e["config"]: e["score"] for e in both} == {IDS[0]: 99.0, IDS[1]: 50.0}, "the latest run's value"
