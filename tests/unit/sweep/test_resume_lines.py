"""What a resumed sweep keeps and returns (issues 20 and 21): every line of the run reaches
the controller (re-measures, pruned and duplicate rows), a resume that cannot be ranked with
what the run measured (other workloads, another host name) is refused before anything is
launched, a line that is not a result is measured again, and a results file removed
mid-run is written again from the sweep's memory.

The node's sweep runs here with its launches faked (no server): the resume logic is what is
under test, on the real planner, strategies and results file."""

from __future__ import annotations

import copy
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._bench import bench_client
from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_core, sweep_runner

MATRIX: dict[str, Any] = {
    "model": {"path": "/models/qwen", "quantization": "modelopt_fp4"},
    "hardware": {"gpu": "sm120", "count": 8},
    "sglang": {"version": "0.5.23"},
    "base": {"tp-size": 8, "quantization": "modelopt_fp4"},
    "axes": {"case": ["a", "b", "c", "pruned", "duplicate"]},
    "bundles": {
        "case": {
            "a": {"moe-runner-backend": "flashinfer_cutlass", "cuda-graph-max-bs-decode": 16},
            "b": {"cuda-graph-max-bs-decode": 24},
            "c": {"cuda-graph-max-bs-decode": 32},
            "pruned": {"moe-runner-backend": "flashinfer_trtllm", "cuda-graph-max-bs-decode": 96},
            "duplicate": {"moe-runner-backend": "auto", "cuda-graph-max-bs-decode": 16},
        }
    },
    "workloads": [{"name": "single", "input_len": 32, "output_len": 16, "concurrency": 1, "num_prompts": 3}],
    "objective": {"workload": "single", "metric": "output_throughput", "goal": "max"},
}
SPEED = {"a": 100.0, "b": 300.0, "c": 200.0}


def options(tmp_path: Path, matrix: dict[str, Any] | None = None, **params: Any) -> sweep_runner.SweepOptions:
    params.setdefault("run_id", "r1")
    params.setdefault("node", "node-a")
    params.setdefault("strategy", "grid")
    return sweep_runner.SweepOptions(
        matrix=copy.deepcopy(matrix or MATRIX),
        results_path=str(tmp_path / "node" / params["run_id"] / "results.jsonl"),
        node_lock=str(tmp_path / "node.lock"),
        **params,
    )


def fake_launches(
    monkeypatch: pytest.MonkeyPatch, stop_after: int | None = None, hook: Any = None
) -> list[str]:
    """Launches answer at once with a value per case; SIGTERM-like stop after `stop_after`."""
    launched: list[str] = []

    def launch(self: sweep_runner.Sweep, config: dict[str, Any], progress: Any) -> dict[str, Any]:
        if stop_after is not None and len(launched) >= stop_after:
            raise sweep_runner.Cancelled()
        launched.append(config["id"])
        if hook is not None:
            hook(self, len(launched))
        value = SPEED[config["point"]["case"]] + len(launched) * 0.01
        metrics = {}
        for w in self.workloads[config["id"]]:
            metrics[w["name"]] = {
                "n": 1,
                "values": {"output_throughput": value},
                "repetitions": [{"output_throughput": value}],
                "workload": bench_client.Workload.from_dict(w).to_dict(),
            }
        return self._line(config, "ok", metrics=metrics, started_at=sweep_core.now())

    monkeypatch.setattr(sweep_runner.Sweep, "launch", launch)
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # keep pytest's own SIGTERM handling
    return launched


def run(opts: sweep_runner.SweepOptions) -> dict[str, Any]:
    """One node sweep; its locks go with it, as they go with a sweep's process."""
    the_sweep = sweep_runner.Sweep(opts, sweep_runner.make_plan(opts))
    try:
        return the_sweep.run()
    finally:
        for fd in (getattr(the_sweep, "_lock", None), getattr(the_sweep, "_node_lock", None)):
            if fd is not None:
                os.close(fd)


def file_lines(opts: sweep_runner.SweepOptions) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in Path(opts.results_path).read_text().splitlines() if raw.strip()]


def test_a_resumed_run_returns_its_pruned_and_duplicate_rows_too(tmp_path: Path, monkeypatch) -> None:
    fake_launches(monkeypatch, stop_after=1)
    first = run(options(tmp_path))
    assert first["error"] and "cancelled" in first["error"]
    fake_launches(monkeypatch)
    outcome = run(options(tmp_path))
    statuses = sorted(line["status"] for line in outcome["results"])
    assert statuses == ["duplicate", "ok", "ok", "ok", "pruned"]  # 5 configs, 5 rows: none lost
    assert outcome["results"] == file_lines(options(tmp_path))


def test_every_launch_of_an_interrupted_remeasure_is_returned_in_file_order(tmp_path, monkeypatch) -> None:
    # adaptive's finals measured a config again, then the sweep was stopped; the resume
    # returns every launch the node has, oldest first (the database numbers attempts so).
    fake_launches(monkeypatch, stop_after=2)
    opts = options(tmp_path, strategy="adaptive")
    run(opts)
    lines = file_lines(opts)
    first = next(line for line in lines if line["status"] == "ok")
    again = copy.deepcopy(first)
    again["metrics"]["single"]["values"]["output_throughput"] += 7.0
    again["finished_at"] = "2999-01-01T00:00:00+00:00"
    with open(opts.results_path, "a") as out:
        out.write(json.dumps(again) + "\n")
    fake_launches(monkeypatch)
    outcome = run(options(tmp_path, strategy="adaptive"))
    launches = [line for line in outcome["results"] if line["config_id"] == first["config_id"]]
    assert launches[:2] == [first, again]
    assert outcome["results"] == file_lines(opts)


def test_a_resume_with_other_workloads_is_refused_saying_what_changed(tmp_path, monkeypatch) -> None:
    launched = fake_launches(monkeypatch, stop_after=1)
    run(options(tmp_path))
    changed = copy.deepcopy(MATRIX)
    changed["workloads"][0]["concurrency"] = 8
    fake_launches(monkeypatch)
    with pytest.raises(sweep_runner.SweepFailed) as err:
        run(options(tmp_path, changed))
    message = str(err.value)
    assert "workload 'single': concurrency 1 -> 8" in message
    assert "--force" in message and "new run" in message
    assert len(file_lines(options(tmp_path))) == 3 and len(launched) == 1  # nothing launched


def test_a_resume_under_another_host_name_is_refused(tmp_path, monkeypatch) -> None:
    fake_launches(monkeypatch, stop_after=1)
    run(options(tmp_path))
    launched = fake_launches(monkeypatch)
    with pytest.raises(sweep_runner.SweepFailed, match=r"as host 'node-a'.*calls it 'node-b'"):
        run(options(tmp_path, node="node-b"))
    assert launched == []


def test_a_line_that_is_not_a_result_is_measured_again_with_a_warning(tmp_path, monkeypatch) -> None:
    fake_launches(monkeypatch)
    opts = options(tmp_path)
    run(opts)
    lines = file_lines(opts)
    broken = next(n for n, line in enumerate(lines) if line["status"] == "ok" and n < len(lines) - 1)
    config = lines[broken]["config_id"]
    del lines[broken]["metrics"]
    Path(opts.results_path).write_text("".join(json.dumps(line) + "\n" for line in lines))
    launched = fake_launches(monkeypatch)
    outcome = run(options(tmp_path))
    assert launched == [config]
    warning = outcome["summary"]["warnings"][0]
    assert (
        f"results.jsonl:{broken + 1}: skipped a line that is not a result (missing key 'metrics'" in warning
    )
    assert config in warning and "measured again" in warning


def test_a_results_file_removed_mid_run_is_written_again_and_a_resume_measures_nothing(
    tmp_path, monkeypatch
) -> None:
    def remove_after_two(the_sweep: sweep_runner.Sweep, n: int) -> None:
        if n == 2:
            os.unlink(the_sweep.results.path)

    fake_launches(monkeypatch, hook=remove_after_two)
    opts = options(tmp_path)
    outcome = run(opts)
    assert any("removed or replaced" in w for w in outcome["summary"]["warnings"])
    assert sorted(line["config_id"] for line in file_lines(opts)) == sorted(
        line["config_id"] for line in outcome["results"]
    )
    launched = fake_launches(monkeypatch)
    again = run(options(tmp_path))
    assert launched == [] and len(again["results"]) == 5
    assert all(results_contract.validate_line(line) is None for line in again["results"])


@pytest.mark.parametrize("stop_after", [None, 1])
def test_every_config_of_the_plan_is_a_line_or_named_as_not_launched(
    tmp_path, monkeypatch, stop_after
) -> None:
    fake_launches(monkeypatch, stop_after=stop_after)
    opts = options(tmp_path, strategy="adaptive")
    the_plan = sweep_runner.make_plan(opts)
    outcome = run(opts)
    key = "not_reached" if stop_after else "left_out"
    named = {entry["config"] for entry in outcome["summary"][key]}
    assert all(entry["point"] for entry in outcome["summary"][key])
    lines = {line["config_id"] for line in outcome["results"]}
    assert lines | named == {config["id"] for config in the_plan["configs"]} and not lines & named


def test_a_resume_after_its_results_file_was_removed_says_it_measures_again(tmp_path, monkeypatch) -> None:
    fake_launches(monkeypatch)
    opts = options(tmp_path)
    run(opts)
    os.unlink(opts.results_path)  # after the sweep ended: nothing could write it again
    launched = fake_launches(monkeypatch)
    outcome = run(options(tmp_path))
    assert len(launched) == 3
    warning = next(w for w in outcome["summary"]["warnings"] if "measured again" in w)
    assert "holds 0 launches of run r1, but the sweep that ran here before made 3" in warning
