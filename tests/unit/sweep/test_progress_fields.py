"""The progress file has one declaration (issue 22): module_utils/_contracts/progress_fields. The
writer (sweep_state.Progress), the sweep_progress module's view and the controller's live
view (bwtune.progress.HostProgress) each derive from it, and these tests fail when a field
is added in one of them only."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import progress_fields
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_state
from ansible_collections.bwtune.sglang.plugins.modules import sweep_progress
from bwtune import progress
from bwtune.ansible_run import RunnerEvent


def test_the_declaration_is_consistent() -> None:
    assert progress_fields.problems() == []
    assert set(progress_fields.LIVE) <= set(progress_fields.VIEW)


def test_the_writer_writes_every_declared_field_and_no_other(tmp_path: Path) -> None:
    results = tmp_path / "r1" / "results.jsonl"
    results.parent.mkdir()
    writer = sweep_state.Progress(str(results), "r1", 3)
    on_disk = json.loads(Path(sweep_state.progress_path(str(results))).read_text())
    assert sorted(on_disk) == sorted(progress_fields.NAMES)
    assert tuple(writer.data) == progress_fields.NAMES
    assert on_disk["run_id"] == "r1" and on_disk["planned"] == 3 and on_disk["done"] == 0
    writer.phase("c0123456789", "workload", 1, 2)
    assert tuple(writer.data["current"]) == progress_fields.CURRENT
    writer.config_done(False, 10.0)
    writer.finish({"results": []})
    assert sorted(sweep_state.read_progress(str(results)) or {}) == sorted(progress_fields.NAMES)


def test_a_record_takes_declared_fields_only() -> None:
    with pytest.raises(KeyError, match="not a progress field: planed"):
        progress_fields.new(planed=3)


def test_the_module_returns_the_declared_view(tmp_path: Path) -> None:
    results = tmp_path / "r1" / "results.jsonl"
    results.parent.mkdir()
    writer = sweep_state.Progress(str(results), "r1", 4)
    writer.phase("c0123456789", "gate")
    params = {"results_path": str(results), "async_dir": str(tmp_path), "job_id": None, "async_s": None}
    finished, view, result = sweep_progress._look(params)
    assert (finished, result) == (False, None)  # this process wrote it: a live sweep
    assert tuple(view) == progress_fields.VIEW
    assert view["planned"] == 4 and view["current"]["phase"] == "gate"


def test_the_modules_documented_sample_is_the_view() -> None:
    returned = yaml.safe_load(sweep_progress.RETURN)
    sample = returned["progress"]["sample"]
    assert set(sample) <= set(progress_fields.VIEW)
    assert tuple(sample["current"]) == progress_fields.CURRENT


def test_the_live_view_keeps_the_live_fields_and_its_own_only() -> None:
    attributes = tuple(f.name for f in dataclasses.fields(progress.HostProgress))
    assert sorted(attributes) == sorted(progress.OWN_FIELDS + progress_fields.LIVE)
    assert not set(progress.OWN_FIELDS) & set(progress_fields.NAMES) - {"finished"}


def test_the_live_view_reads_every_live_field_from_a_retry() -> None:
    report: dict[str, Any] = {
        "run_id": "r1",
        "planned": 6,
        "done": 2,
        "failed": 1,
        "current": progress_fields.current("c0123456789", "workload", 1, 2),
        "eta_s": 30,
    }
    assert set(report) == set(progress_fields.VIEW)
    state = progress.SweepState.for_hosts({"h1": False})
    res = {"progress": report, "finished": False}
    state.update(RunnerEvent("retry", "h1", progress.FOLLOW_TASK, "bwtune.sglang.sweep_progress", res, {}))
    host = state.hosts["h1"]
    assert {name: getattr(host, name) for name in progress_fields.LIVE} == {
        "planned": 6,
        "done": 2,
        "failed": 1,
        "current": report["current"],
        "eta_s": 30.0,
    }
    # A planned not known yet keeps what the view knew; a bad eta is no ETA.
    state.update(
        RunnerEvent("retry", "h1", progress.FOLLOW_TASK, "bwtune.sglang.sweep_progress",
                    {"progress": {**report, "planned": None, "eta_s": "soon"}}, {})
    )  # fmt: skip
    assert (host.planned, host.eta_s) == (6, None)
