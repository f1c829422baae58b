"""One command-line convention for every `bwtune` command (issue 9): --json, -e, completion,
a closed pipe, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bwtune import exit_codes
from bwtune.cli import build_parser, main
from bwtune.commands import _playbook_options as playbook_options
from bwtune.commands import sweep_command as sweep
from bwtune.commands.completion import bash_script

REPO = Path(__file__).resolve().parents[3]
SM120 = REPO / "examples" / "qwen35-397b-nvfp4-sm120.yml"


def test_a_reader_that_goes_away_ends_bwtune_quietly_with_141() -> None:
    # The plan's JSON (about 110 kB) is more than a pipe holds: bwtune is still writing
    # when the reader closes its end, as with `bwtune plan M --json | head -1`.
    proc = subprocess.Popen(
        [sys.executable, "-m", "bwtune.cli", "plan", str(SM120), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"{\n"
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == exit_codes.BROKEN_PIPE == 141
    assert err == b""  # no BrokenPipeError traceback, no "Exception ignored" at exit


def _complete(script: Path, *words: str) -> list[str]:
    """What the generated bash function offers for the command line `words` (last = cursor)."""
    line = " ".join(f"'{word}'" for word in words)
    shell = (
        f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
        '_bwtune; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True, timeout=30)
    return done.stdout.split()


def test_bash_completion_is_valid_bash_and_completes_commands_options_and_choices(tmp_path: Path) -> None:
    script = tmp_path / "bwtune.bash"
    script.write_text(bash_script(build_parser()))
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
    assert _complete(script, "bwtune", "sw") == ["sweep"]
    assert {"cancel", "completion", "plan", "runs", "sweep"} <= set(_complete(script, "bwtune", ""))
    assert set(_complete(script, "bwtune", "sweep", "--re")) == {"--resume"}
    assert _complete(script, "bwtune", "sweep", "-i", "x.yml", "--strategy", "") == list(sweep.STRATEGIES)
    assert "grid" in sweep.STRATEGIES
    assert _complete(script, "bwtune", "completion", "") == ["bash", "zsh"]
    assert {"-e", "--extra-vars", "-l", "--limit", "-v", "--verbose"} <= set(
        _complete(script, "bwtune", "facts", "-")
    )


def test_completion_command_prints_bash_and_zsh(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    bash = capsys.readouterr().out
    assert bash.rstrip().endswith("complete -o default -F _bwtune bwtune")
    assert main(["completion", "zsh"]) == 0
    zsh = capsys.readouterr().out
    assert zsh.startswith("#compdef bwtune\n") and "bashcompinit" in zsh and zsh.endswith(bash)


def test_extra_vars_are_checked_the_way_ansible_playbook_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "vars.yml").write_text("sweep_port: 31000\n")
    monkeypatch.chdir(tmp_path)
    checked = playbook_options.check_extra_vars(["a=1 b=two", '{"sweep_env": {"X": "1"}}', "@vars.yml"])
    # An @file is made absolute: ansible-playbook runs in another directory.
    assert checked == ["a=1 b=two", '{"sweep_env": {"X": "1"}}', f"@{tmp_path / 'vars.yml'}"]
    assert playbook_options.extra_vars_args(checked)[:2] == ["-e", "a=1 b=two"]
    bad = {
        "{broken": "-e {broken: YAML parsing failed",
        "[1, 2]": "-e [1, 2]: not a mapping",
        "justaword": "-e justaword: not key=value",
        "@missing.yml": "-e @missing.yml: missing.yml: no such file",
        "vars.yml": "-e vars.yml: not key=value",  # a file without its @
        "./vars.yml": "-e ./vars.yml: a file of variables is given as @./vars.yml",
    }
    for value, start in bad.items():
        with pytest.raises(playbook_options.ExtraVarsError) as err:
            playbook_options.check_extra_vars([value])
        assert str(err.value).startswith(start) and "\n" not in str(err.value)


def test_a_bad_extra_var_is_one_line_exit_2_and_nothing_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    code = main(["sweep", "-i", str(REPO / "inventory" / "local.yml"), "-m", str(SM120), "-e", "{oops"])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert err.startswith("bwtune: -e {oops: ") and err.count("\n") == 1
    assert not (tmp_path / "home").exists()


def test_playbook_commands_take_ansible_playbooks_short_options() -> None:
    parser = build_parser()
    args = parser.parse_args(["facts", "-i", "inv.yml", "-l", "gpu-*", "-vvv", "-e", "a=1", "-e", "@f.yml"])
    assert (args.limit, args.verbose, args.extra_vars) == ("gpu-*", 3, ["a=1", "@f.yml"])
    args = parser.parse_args(["sweep", "--attach", "R1", "-vvvvvv"])
    assert args.attach == "R1" and args.inventory is None
    assert playbook_options.verbosity(args) == playbook_options.MAX_VERBOSITY == 4
