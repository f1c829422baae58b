"""The stand-in step runner's stacks, refusals and bad input; the stand-in's stack hook."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bwtune.bisect import step_runner
from bwtune.bisect.bisection import Untestable
from bwtune.bisect.component_ranges import BisectError
from bwtune.bisect.step_runner import StandinStepRunner, first_parent_commits
from bwtune.standin import profile as standin_profile

REPO = Path(__file__).resolve().parents[3]
MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
ARGS = ["--model-path", str(MODEL), "--tp-size", "8"]


def git(repo: Path, *argv: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo),
    }
    return subprocess.run(
        ["git", *argv], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Three commits: ok, a syntax error, fixed."""
    path = tmp_path_factory.mktemp("checkout")
    git(path, "init", "-q", "-b", "main")
    shas = []
    for i, text in enumerate(["x = 1\n", "def f(:\n", "x = 3\n"]):
        (path / "python" / "sglang").mkdir(parents=True, exist_ok=True)
        (path / "python" / "sglang" / "__init__.py").write_text(text)
        (path / "python" / "sglang" / "bwtune_standin.json").write_text('{"decode_step_factor": 1.0}\n')
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"commit {i}")
        shas.append(git(path, "rev-parse", "HEAD").strip())
    return path, shas


def runner(repo: tuple[Path, list[str]], tmp_path: Path, args: list[str] = ARGS) -> StandinStepRunner:
    return StandinStepRunner(repo[0], args, tmp_path / "stacks", tmp_path / "run")


def test_a_stack_is_built_once_per_commit_across_runners(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    _, shas = repo
    first = runner(repo, tmp_path)
    built = first.stack(shas[0])
    assert isinstance(built, Path) and (built / "sglang" / "bwtune_standin.json").is_file()
    assert first.stack(shas[0]) == built
    second = runner(repo, tmp_path)
    assert second.stack(shas[0]) == built
    assert (first.builds, first.reused, second.builds, second.reused) == (1, 1, 0, 1)
    lines = (tmp_path / "stacks" / "builds.jsonl").read_text().splitlines()
    assert [json.loads(line)["commit"] for line in lines] == [shas[0]]


def test_a_failed_build_is_untestable_and_not_tried_again(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    _, shas = repo
    first = runner(repo, tmp_path)
    got = first.stack(shas[1])
    assert isinstance(got, Untestable) and got.stage == "build"
    assert "python/sglang/__init__.py:1: SyntaxError" in got.reason
    again = runner(repo, tmp_path).stack(shas[1])
    assert again == got
    assert len((tmp_path / "stacks" / "builds.jsonl").read_text().splitlines()) == 1
    assert not list((tmp_path / "stacks").glob(".*tmp*"))  # nothing half-built left


def test_a_refused_launch_is_untestable_and_leaves_no_server(
    repo: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BWTUNE_STANDIN_STATE_DIR", str(tmp_path / "state"))
    _, shas = repo
    r = runner(repo, tmp_path, [*ARGS, "--no-such-flag"])
    got = r({"sglang_commit": shas[0], "torch": None}, 3)
    assert isinstance(got, Untestable) and got.stage == "launch"
    assert got.reason.startswith("the server exited 2:")
    assert r.launches == 1  # the first refusal ends the step
    assert not (tmp_path / "run" / "server.json").exists()
    ledger = [json.loads(line) for line in (tmp_path / "run" / "launches.jsonl").read_text().splitlines()]
    assert [(x["commit"], x["number"], "error" in x) for x in ledger] == [(shas[0], 0, True)]


@pytest.mark.parametrize(
    ("args", "stack", "message"),
    [
        ([*ARGS, "--port", "1"], None, "--server-args: leave out --host and --port"),
        (["--tp-size", "8"], None, "--server-args: the pinned config needs --model-path"),
        (ARGS, {"torch": "2.9.0"}, "builds sglang_commit only; this stack also sets torch=2.9.0"),
    ],
)
def test_bad_input_is_one_line(
    repo: tuple[Path, list[str]], tmp_path: Path, args: list[str], stack: dict[str, str] | None, message: str
) -> None:
    with pytest.raises(BisectError) as err:
        r = runner(repo, tmp_path, args)
        r({"sglang_commit": repo[1][0], **(stack or {})}, 1)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_first_parent_commits_and_bad_revisions(repo: tuple[Path, list[str]]) -> None:
    path, shas = repo
    good, bad, candidates = first_parent_commits(path, shas[0], "main")
    assert (good, bad) == (shas[0], shas[2])
    assert [(c.value, c.note) for c in candidates] == [(s, f"commit {i}") for i, s in enumerate(shas)]
    with pytest.raises(BisectError, match=r"^the bad revision 'nope': not a commit in "):
        first_parent_commits(path, shas[0], "nope")
    with pytest.raises(BisectError, match=r"is not on the first-parent history of the bad"):
        first_parent_commits(path, shas[2], shas[0])
    with pytest.raises(BisectError, match=r"the same commit"):
        first_parent_commits(path, shas[1], shas[1])


def test_a_leftover_record_of_another_process_kills_nothing(tmp_path: Path) -> None:
    record = tmp_path / "server.json"
    record.write_text(json.dumps({"pid": os.getpid(), "port": 1, "commit": "x"}))
    assert step_runner.stop_leftover(record) is False
    assert not record.exists()  # and the record is gone


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--measure"], "--measure: only --local (this machine, the stand-in) is built"),
        (["--measure", "--local"], "--measure --local: give --checkout"),
        (["--local"], "--local: add --measure"),
    ],
)
def test_cli_measure_bad_input(flags: list[str], message: str, tmp_path: Path) -> None:
    env = {**os.environ, "BWTUNE_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "bwtune.cli", "bisect", "a", "b", *flags],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"bwtune bisect: {message}")


def test_the_standin_reads_the_stack_speed_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(standin_profile.STACK_ENV, raising=False)
    base = standin_profile.load_profile()
    stack = tmp_path / "stack"
    (stack / "sglang").mkdir(parents=True)
    monkeypatch.setenv(standin_profile.STACK_ENV, str(stack))
    assert standin_profile.load_profile() == base  # no file: the profile as it is
    (stack / "sglang" / "bwtune_standin.json").write_text('{"decode_step_factor": 1.25, "launch_cv": 0.1}')
    slow = standin_profile.load_profile()
    assert slow.step_ms == [(b, ms * 1.25) for b, ms in base.step_ms] and slow.cv == 0.1
    assert dataclasses.replace(slow, step_ms=base.step_ms, cv=base.cv, baseline=base.baseline) == base
    (stack / "sglang" / "bwtune_standin.json").write_text('{"decode_step_factor": "fast"}')
    with pytest.raises(standin_profile.ProfileError, match="decode_step_factor 'fast' is not a number"):
        standin_profile.load_profile()
