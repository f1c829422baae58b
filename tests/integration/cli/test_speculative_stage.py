"""`bwtune speculative BASE_RUN` end to end (issue 26) on the stand-in: a base run of one
config, then the stage on its winner. Where MTP wins at the target load it concludes
"on (steps=..)", where it loses "off"; the accept length is in the results and `--json`;
and the load at which MTP starts to lose, measured across the stage's loads, is where the
stand-in's profile puts it (bwtune.standin.performance.spec_crossover_batch).

Three runs on the fast profile: about 4 minutes on 2 busy cores.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bwtune.standin.performance import spec_crossover_batch
from bwtune.standin.profile import load_profile
from tests.integration.cli.conftest import MODEL, REPO, STANDIN, bwtune_argv, run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MTP3 = {"speculative-algorithm": "NEXTN", "speculative-num-steps": 3, "speculative-eagle-topk": 1,
        "speculative-num-draft-tokens": 4}  # fmt: skip


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spec") / "bwtune-home"


@pytest.fixture(scope="module")
def env(home: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("spec-env")
    profile = yaml.safe_load(
        (REPO / "src/bwtune/standin/profiles/rtx-pro-6000x8-qwen35-397b-nvfp4.yml").read_text()
    )
    profile["startup"].update({"weight_load_s": 1, "graph_capture_s": 1})
    (folder / "fast.yml").write_text(yaml.safe_dump(profile))
    out = {k: v for k, v in os.environ.items() if k != "BWTUNE_DB"}
    out.update({"BWTUNE_HOME": str(home), "BWTUNE_STANDIN_PROFILE": str(folder / "fast.yml")})
    out["PATH"] = str(Path(sys.executable).parent) + os.pathsep + out.get("PATH", "")
    return out


@pytest.fixture(scope="module")
def base_run(env: dict[str, str], home: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """One config (MTP off) at concurrency 8: the winner the stage builds on."""
    folder = tmp_path_factory.mktemp("spec-base")
    shutil.copytree(MODEL, folder / "model")
    matrix: dict[str, Any] = yaml.safe_load((REPO / "examples" / "demo.yml").read_text())
    matrix["model"]["path"] = str(folder / "model")
    matrix["base"] = {**matrix["base"], "fp4-gemm-backend": "flashinfer_cutlass"}
    matrix["axes"] = {"moe-runner-backend": ["flashinfer_cutlass"]}
    for key in ("bundles", "exclude"):
        matrix.pop(key)
    matrix["workloads"] = [
        {"name": "c8", "input_len": 64, "output_len": 64, "concurrency": 8, "num_prompts": 16}
    ]
    matrix["objective"] = {"workload": "c8", "metric": "output_throughput", "goal": "max"}
    path = folder / "base.yml"
    path.write_text(yaml.safe_dump(matrix, sort_keys=False))
    argv = ["sweep", "-i", str(STANDIN), "-m", str(path), "--strategy", "grid", "--quiet",
            "--node-results-dir", str(home / "sweeps")]  # fmt: skip
    proc = run(bwtune_argv(*argv), env, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.search(r"^run (\S+)  SIMULATED", proc.stdout, re.M)
    assert found, proc.stdout
    return found.group(1)


def stage(env: dict[str, str], home: Path, base: str, *extra: str) -> dict[str, Any]:
    argv = ["speculative", base, "-i", str(STANDIN), "--quiet", "--json", "--node-results-dir",
            str(home / "sweeps"), *extra]  # fmt: skip
    proc = run(bwtune_argv(*argv), env, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_mtp_wins_at_a_light_load(env: dict[str, str], home: Path, base_run: str) -> None:
    out = stage(env, home, base_run, "--load", "8", "--steps", "1,3", "--output-len", "64")
    spec = out["speculative"]
    assert spec["base_run"] == base_run and spec["base_config"]["setting"] == "off"
    assert spec["conclusion"]["winner"] == "on (EAGLE steps=3, topk=1, draft=4)", spec["conclusion"]
    (row,) = spec["rows"]
    assert row["gain"] > 0.3 and row["on"]["accept_length"] > 2.0  # about the accept length at batch 8
    # Accept length in the results: each config with MTP on has it, off has none.
    for result in out["results"]:
        accept = result["metrics"]["c8"]["values"]["accept_length"]
        has_spec = bool(result["flags"].get("speculative-algorithm"))
        assert (accept is not None and 1.0 < accept <= 4.0) if has_spec else accept is None, result["flags"]
    run_id = out["run_id"]
    exported = run(bwtune_argv("export", run_id, "--format", "json"), env)
    assert exported.returncode == 0, exported.stderr
    values = [r["metrics"]["c8"]["values"]["accept_length"] for r in json.loads(exported.stdout)["results"]]
    assert sorted(v for v in values if v is not None) == sorted(
        r["metrics"]["c8"]["values"]["accept_length"]
        for r in out["results"]
        if r["flags"].get("speculative-algorithm")
    )
    report = (home / "runs" / run_id / "report.md").read_text()
    assert "## Speculative decoding" in report and f"run `{base_run}`'s winner" in report
    assert "**At the target load (concurrency 8): on (EAGLE steps=3, topk=1, draft=4).**" in report
    assert "Speculative decoding" in (home / "runs" / run_id / "report.html").read_text()
    link = json.loads((home / "runs" / run_id / "speculative_stage.json").read_text())
    assert link["base_run"] == base_run and set(link["settings"]) == {"off", "s1k1d2", "s3k1d4"}


def test_mtp_loses_under_load_where_the_profile_says(env: dict[str, str], home: Path, base_run: str) -> None:
    loads = [64, 24, 40]
    out = stage(env, home, base_run, *[w for n in loads for w in ("--load", str(n))], "--steps", "3",
                "--output-len", "128")  # fmt: skip
    spec = out["speculative"]
    assert spec["conclusion"]["winner"] == "off", spec["conclusion"]
    assert spec["conclusion"]["wins"] == ["concurrency 24"]
    assert sorted(spec["conclusion"]["loses"]) == ["concurrency 40", "concurrency 64"]
    gains = {int(r["workload"][1:]): r["gain"] for r in spec["rows"]}
    assert sorted(gains) == sorted(loads)
    # Where the measured gain changes sign, interpolated in log(on/off) between the loads around it.
    ordered = sorted(gains)
    crossing = next((a, b) for a, b in itertools.pairwise(ordered) if gains[a] > 0 >= gains[b])
    a, b = crossing
    la, lb = math.log1p(gains[a]), math.log1p(gains[b])
    measured = a + (b - a) * la / (la - lb)
    flags = {"tp-size": 8, "quantization": "modelopt_fp4", "moe-runner-backend": "flashinfer_cutlass",
             "fp4-gemm-backend": "flashinfer_cutlass", **MTP3}  # fmt: skip
    expected = spec_crossover_batch(load_profile("rtx-pro-6000x8-qwen35-397b-nvfp4"), flags)
    assert expected is not None
    # Closed loops keep about `concurrency` requests running (a prefill now and then, requests of
    # one wave ending a few steps apart): the measured crossover is the profile's within 25%.
    assert abs(measured - expected) <= 0.25 * expected, (gains, measured, expected)
