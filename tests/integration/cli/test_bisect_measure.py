"""`bwtune bisect GOOD BAD --measure --local` on the stand-in over the fixture history (issue 28).

The fixture checkout's `bisect-history` branch (tests/fixtures/sglang_checkout/make_checkout.py):
64 commits, a planted slowdown at PLANTED_AT, a build that fails at BROKEN_AT, launches that
spread far over the verdict's noise limit at NOISY_AT. Each step's stack is made from its
commit and launched as a scratch stand-in (docs/bisect.md).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, bwtune_argv, run

_spec = importlib.util.spec_from_file_location(
    "make_checkout", REPO / "tests" / "fixtures" / "sglang_checkout" / "make_checkout.py"
)
assert _spec is not None and _spec.loader is not None
make_checkout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_checkout)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
SERVER_ARGS = (
    f"--model-path {MODEL} --tp-size 8 --quantization modelopt_fp4 --moe-runner-backend flashinfer_cutlass"
)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return make_checkout.make(tmp_path_factory.mktemp("sglang") / "checkout", history=True)


@pytest.fixture
def env(cli_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in cli_env.items() if k not in ("BWTUNE_STANDIN_PROFILE", "BWTUNE_STANDIN_STACK")}
    out.update(BWTUNE_STANDIN_STARTUP_SCALE="0.002", BWTUNE_STANDIN_STATE_DIR=str(tmp_path / "standin-state"))
    return out


def argv(history: dict[str, Any], good: int, bad: int, run_dir: Path, cache: Path, *extra: str) -> list[str]:
    shas = history["history"]
    return bwtune_argv(
        "bisect", shas[good], shas[bad], "--measure", "--local", "--checkout", history["path"],
        "--server-args", SERVER_ARGS, "--run-dir", str(run_dir), "--stack-cache", str(cache), *extra,
    )  # fmt: skip


def log_records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "bisect.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return [r for r in out if r.get("kind") in ("launches", "untestable")]


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_finds_the_planted_commit_skips_the_broken_one_and_resumes(
    history: dict[str, Any], env: dict[str, str], tmp_path: Path
) -> None:
    shas = history["history"]
    run_dir, cache = tmp_path / "bisect", tmp_path / "stacks"
    args = argv(history, 0, len(shas) - 1, run_dir, cache, "--json")
    # Killed (SIGKILL, no clean-up) once the log holds the broken build and a step after it.
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    leftover: int | None = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            kinds = [r["kind"] for r in log_records(run_dir)]
            if "untestable" in kinds and kinds.index("untestable") < len(kinds) - 1:
                break
            time.sleep(0.1)
        assert proc.poll() is None, f"the bisection ended before it was killed: {proc.stderr.read()}"
        server = run_dir / "server.json"
        while time.monotonic() < deadline and leftover is None:  # inside the next launch
            with contextlib.suppress(OSError, ValueError):
                leftover = int(json.loads(server.read_text())["pid"])
            time.sleep(0.02)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    before = log_records(run_dir)
    launches_before = sum(len(r["launches"]) for r in before if r["kind"] == "launches")
    builds_before = [json.loads(line) for line in (cache / "builds.jsonl").read_text().splitlines()]

    try:
        done = run(args, env, timeout=600)
    finally:
        if leftover is not None and alive(leftover) and b"bwtune.standin" in cmdline(leftover):
            os.killpg(leftover, signal.SIGKILL)  # the test's own clean-up, should the resume fail
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    report = out["report"]

    # The planted commit, with its subject.
    planted = make_checkout.PLANTED_AT
    assert out["first_bad"] == [{"commit": shas[planted], "subject": make_checkout.history_subject(planted)}]
    assert report["findings"][0]["last_good"] == shas[planted - 1]
    assert report["measured_steps"] <= math.ceil(math.log2(len(shas))) + 2
    # The broken commit was tried once, skipped, and is not the answer.
    broken = [
        s for s in report["steps"] if s["changes"].get("sglang_commit") == shas[make_checkout.BROKEN_AT]
    ]
    assert [s["verdict"] for s in broken] == ["untestable"]
    assert "SyntaxError" in broken[0]["note"]
    # Nothing built twice: one build per stack tried, across the kill.
    builds = [json.loads(line) for line in (cache / "builds.jsonl").read_text().splitlines()]
    assert len({b["commit"] for b in builds}) == len(builds) == report["builds"]
    assert [b["ok"] for b in builds if b["commit"] == shas[make_checkout.BROKEN_AT]] == [False]
    assert out["this_run"]["builds"] == len(builds) - len(builds_before)
    # Resumed, not re-measured: the resumed run launched only what the log lacked.
    assert out["logged_before"] == len(before) > 0
    assert out["this_run"]["launches"] == report["launches"] - launches_before
    assert (
        sum(len(r["launches"]) for r in log_records(run_dir) if r["kind"] == "launches") == report["launches"]
    )
    # The server the kill left behind was stopped by the resumed run.
    assert leftover is not None and out["this_run"]["leftover_servers_stopped"] == 1
    assert not alive(leftover)
    assert not (run_dir / "server.json").exists()

    # Over the finished log: nothing built, nothing launched, the same answer in text.
    again = run(argv(history, 0, len(shas) - 1, run_dir, cache), env, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"first bad commit: {shas[planted]} {make_checkout.history_subject(planted)}" in again.stdout
    assert "(0 built by this run" in again.stdout and "(0 by this run)" in again.stdout
    assert "a linear search: " in again.stdout


def test_a_noisy_step_gets_more_launches_and_no_guess(
    history: dict[str, Any], env: dict[str, str], tmp_path: Path
) -> None:
    """GOOD = the commit before the planted one, BAD = the tip: the first step is the noisy
    commit, whose launches spread far over the verdict's 10% noise limit."""
    shas = history["history"]
    good, bad, noisy = make_checkout.PLANTED_AT - 1, len(shas) - 1, make_checkout.NOISY_AT
    assert good + (bad - good) // 2 == noisy  # the search's first midpoint
    run_dir = tmp_path / "bisect"
    done = run(argv(history, good, bad, run_dir, tmp_path / "stacks", "--json", "--max-launches", "5"), env)
    assert done.returncode == 1, done.stderr  # no first bad commit: undecided
    report = json.loads(done.stdout)["report"]
    step = next(s for s in report["steps"] if s["changes"].get("sglang_commit") == shas[noisy])
    assert step["launches"] == 5 and step["verdict"] == "undecided"  # more launches than the first 3
    assert report["outcome"] == "undecided"
    assert [f["status"] for f in report["findings"]] == ["undecided"]
    assert report["findings"][0]["undecided_at"] == shas[noisy] and report["findings"][0]["first_bad"] is None
    logged = [r for r in log_records(run_dir) if r["stack"]["sglang_commit"] == shas[noisy]]
    assert [len(r["launches"]) for r in logged] == [3, 2]  # 3, then 2 more while undecided
