"""Every `--json` carries its `schema`; cancel and report have a --json; the CSV export has
one column per flag of the run's configs (issue 20 item 20)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import ansible_run, results_db
from bwtune.cli import build_parser, main
from bwtune.commands import _task_playbook as task_playbook
from bwtune.commands import sweep_command as sweep

REPO = Path(__file__).resolve().parents[3]
SM120 = REPO / "examples" / "qwen35-397b-nvfp4-sm120.yml"
RUN_ID = "r20261201-json"


def _line(config_id: str, flags: dict[str, Any], value: float) -> dict[str, Any]:
    reps = [{"output_throughput": value}]
    metrics = {
        "chat": {"n": 1, "values": {"output_throughput": value}, "ci95": {}, "cv": {}, "repetitions": reps}
    }
    return contract.make_line(
        run_id=RUN_ID, host="gpu-a", config_id=config_id, status="ok", flags=flags, metrics=metrics,
        stack_fingerprint="sha256:stack",
    )  # fmt: skip


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    conn = results_db.connect(path)
    try:
        results_db.import_results(
            conn,
            [
                _line("c1", {"tp-size": 8, "moe-runner-backend": "triton", "enable-foo": True}, 100.0),
                _line("c2", {"tp-size": 8, "moe-runner-backend": "flashinfer_cutlass"}, 120.0),
            ],
        )
    finally:
        conn.close()
    return path


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(list(argv)) == 0
    out = json.loads(capsys.readouterr().out)
    assert next(iter(out)) == "schema" and out["schema"] == contract.OUTPUT_SCHEMA_VERSION
    return dict(out)


def test_plan_json_carries_its_schema(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = _json(capsys, "plan", str(SM120), "--json", "--db", str(tmp_path / "none.db"))
    assert out["summary"]["expanded"] == 63


def test_facts_json_carries_its_schema(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = ansible_run.PlaybookRun(playbook=Path("facts.yml"), private_data_dir=tmp_path, ident="x", rc=0)
    facts = {"bwtune_gpu": {"count": 8, "sm": "sm120"}, "bwtune_stack": {"fingerprint": "sha256:s"}}
    done.ok.append(
        ansible_run.RunnerEvent(
            "ok", "gpu-a", "Facts", "bwtune.sglang.gpu_facts", {"ansible_facts": facts}, {}
        )
    )
    inventory = ansible_run.Inventory(tmp_path / "inv.yml", {"gpu-a": {}})
    monkeypatch.setattr(
        task_playbook, "run_task_playbook", lambda *a, **k: task_playbook.TaskPlaybookRun(0, inventory, done)
    )
    out = _json(capsys, "facts", "-i", "inv.yml", "--json")
    assert out["rows"][0]["host"] == "gpu-a" and out["groups"] == [["gpu-a"]]


def test_report_json_names_the_best_and_the_files(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    out = _json(capsys, "report", RUN_ID, "--db", str(db), "--html", str(html), "--md", str(md), "--json")
    assert out["best"]["id"] == "c2" and out["best"]["objective"] == 120.0
    assert (out["html"], out["md"]) == (str(html), str(md)) and html.is_file() and md.is_file()


def test_cancel_json_says_what_was_stopped_where(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(
        ansible_run,
        "load_inventory",
        lambda path, limit=None: ansible_run.Inventory(Path(path), {"a": {}, "b": {}}),
    )
    argv = ["sweep", "-i", str(REPO / "inventory" / "local.yml"), "-m", str(REPO / "examples" / "demo.yml")]
    request = sweep.request_from_args(build_parser().parse_args(argv))
    ansible_run.private_data_dir(request.run_id)
    request.settings().save(request.run_id)

    def run_playbook(name: str, inventory: ansible_run.Inventory, extravars: dict, **kwargs: object):
        done = ansible_run.PlaybookRun(playbook=Path(name), private_data_dir=tmp_path, ident="x", rc=0)
        for host, cancel in (
            ("a", {"cancelled": True}),
            ("b", {"cancelled": False, "reason": "no running sweep"}),
        ):
            done.ok.append(
                ansible_run.RunnerEvent(
                    "ok", host, "Stop", "bwtune.sglang.sweep_progress", {"cancel": cancel}, {}
                )
            )
        done.stats = {"ok": {"a": 2, "b": 2}}
        return done

    monkeypatch.setattr(ansible_run, "run_playbook", run_playbook)
    out = _json(capsys, "cancel", request.run_id, "--json")
    assert out["stopped"] == ["a"] and out["not_running"] == {"b": "already finished"}
    assert out["failures"] == [] and out["resume_command"] == f"bwtune sweep --resume {request.run_id}"


def test_csv_export_has_one_column_per_flag(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", RUN_ID, "--db", str(db)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    header = list(rows[0])
    assert [c for c in header if c.startswith("--")] == ["--enable-foo", "--moe-runner-backend", "--tp-size"]
    assert header.index("simulated") < header.index("--enable-foo") < header.index("workload")
    by_config = {row["config_id"]: row for row in rows}
    assert by_config["c1"]["--moe-runner-backend"] == "triton" and by_config["c1"]["--enable-foo"] == "true"
    assert by_config["c2"]["--moe-runner-backend"] == "flashinfer_cutlass"
    assert by_config["c2"]["--enable-foo"] == ""  # c2 leaves it unset
    assert by_config["c2"]["--tp-size"] == "8"
