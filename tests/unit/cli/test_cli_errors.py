"""What a newcomer's mistakes get (issue 20 items 22, 23): the subcommand's own usage and one
line naming the argument, a "did you mean", "no such run", and a cancel that says when there
was nothing to stop."""

from __future__ import annotations

from pathlib import Path

import pytest

from bwtune import ansible_run, exit_codes
from bwtune.cli import build_parser, main
from bwtune.commands import sweep_command as sweep

REPO = Path(__file__).resolve().parents[3]
LOCAL = REPO / "inventory" / "local.yml"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(
        ansible_run,
        "load_inventory",
        lambda path, limit=None: ansible_run.Inventory(Path(path), {"localhost": {}}),
    )
    return tmp_path / "home"


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    assert done.value.code == exit_codes.BAD_INPUT
    out = capsys.readouterr()
    assert out.out == ""
    return out.err.splitlines()


def test_an_unknown_option_gets_the_subcommands_usage_and_one_line_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _error(capsys, "sweep", "--bogus")
    assert err[0].startswith("usage: bwtune sweep ")
    assert err[-1] == "bwtune sweep: error: unrecognized argument: --bogus"
    assert not any(line.startswith("usage: bwtune [-h] [--version]") for line in err)


def test_a_typo_in_an_option_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "sweep", "-m", "x.yml", "--stratgy", "grid")
    assert err[-1] == "bwtune sweep: error: unrecognized argument: --stratgy (did you mean --strategy?)"
    err = _error(capsys, "runs", "--jsn")
    assert err[0].startswith("usage: bwtune runs ")
    assert err[-1] == "bwtune runs: error: unrecognized argument: --jsn (did you mean --json?)"


def test_resume_or_attach_of_an_unknown_run_says_there_is_no_such_run(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    for flag in ("--resume", "--attach"):
        assert main(["sweep", flag, "nosuchrun"]) == exit_codes.BAD_INPUT
        err = capsys.readouterr().err
        assert err.startswith(f"bwtune: {flag} nosuchrun: no run nosuchrun was started from here (")
        assert "bwtune runs" in err and "-i" not in err and err.count("\n") == 1
    assert main(["cancel", "nosuchrun"]) == exit_codes.BAD_INPUT
    assert "no run nosuchrun was started from here" in capsys.readouterr().err


def _a_run() -> sweep.SweepRequest:
    request = sweep.request_from_args(
        build_parser().parse_args(["sweep", "-i", str(LOCAL), "-m", str(REPO / "examples" / "demo.yml")])
    )
    ansible_run.private_data_dir(request.run_id)
    request.settings().save(request.run_id)
    return request


def _node_says(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cancel: dict) -> list[dict]:
    calls: list[dict] = []

    def run_playbook(name: str, inventory: ansible_run.Inventory, extravars: dict, **kwargs: object):
        calls.append({"name": name, **kwargs})
        done = ansible_run.PlaybookRun(playbook=Path(name), private_data_dir=tmp_path, ident="x")
        done.ok.append(
            ansible_run.RunnerEvent(
                "ok", "localhost", "Stop the sweep and its server", "bwtune.sglang.sweep_progress",
                {"changed": bool(cancel.get("cancelled")), "finished": True, "cancel": cancel}, {},
            )
        )  # fmt: skip
        done.stats = {"ok": {"localhost": 2}}
        done.rc = 0
        return done

    monkeypatch.setattr(ansible_run, "run_playbook", run_playbook)
    return calls


def test_cancel_of_a_finished_run_says_there_was_nothing_to_stop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _a_run()
    _node_says(monkeypatch, tmp_path, {"cancelled": False, "reason": "no running sweep"})
    assert main(["cancel", first.run_id]) == exit_codes.OK
    err = capsys.readouterr().err
    assert err == f"bwtune: run {first.run_id} already finished on localhost: nothing to stop\n"


def test_cancel_of_a_running_run_says_where_it_stopped_it_and_takes_forks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _a_run()
    calls = _node_says(monkeypatch, tmp_path, {"cancelled": True, "killed": False, "pid": 42})
    assert main(["cancel", first.run_id, "--forks", "3"]) == exit_codes.OK
    assert capsys.readouterr().err == (
        f"bwtune: cancelled run {first.run_id}; stopped on: localhost\n"
        f"resume with: bwtune sweep --resume {first.run_id}\n"
    )
    assert calls[0]["forks"] == 3


def test_cancel_help_names_only_options_cancel_has(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["cancel", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--resume" not in text and "--attach" not in text
    assert "(file or directory); default: the run's own" in text


def test_a_typo_in_a_command_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "swep", "-i", "x.yml")
    assert err[0].startswith("usage: bwtune ")
    assert err[-1] == "bwtune: error: no command 'swep' (did you mean sweep?); `bwtune --help` lists them"
