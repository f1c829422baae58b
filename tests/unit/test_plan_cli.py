"""`bwtune plan`: table and JSON on stdout; bad input is one line on stderr and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bwtune.cli import main

REPO = Path(__file__).resolve().parents[2]
SM120 = REPO / "examples" / "qwen35-397b-nvfp4-sm120.yml"


def test_json_output_is_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(SM120), "--json"]) == 0
    out = capsys.readouterr()
    plan = json.loads(out.out)
    assert plan["gpu"] == "sm120" and plan["sglang_version"] == "0.5.23"
    assert len(plan["configs"]) == plan["summary"]["expanded"] == 63
    assert out.err == ""


def test_format_json_still_works_and_says_it_is_deprecated(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(SM120), "--format", "json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["summary"]["expanded"] == 63
    assert out.err == "bwtune plan: --format json is deprecated; use --json (or nothing)\n"


def test_table_output_has_a_row_per_config_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(SM120), "--gpu", "sm100"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "SGLang 0.5.23 on sm100" in lines[0]
    assert lines[1].split()[:2] == ["id", "moe-runner-backend"]
    rows = [line for line in lines if line.startswith("c") and len(line.split()[0]) == 11]
    assert len(rows) == 63
    assert "63 configs (72 combinations, 9 excluded)" in out
    assert "GPU-hours" in out


def test_bad_input_is_one_line_with_file_and_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = SM120.read_text().replace("triton, marlin]", "triton, marlin, turbo]")
    bad = tmp_path / "bad.yml"
    bad.write_text(text)
    assert main(["plan", str(bad)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert len(out.err.strip().splitlines()) == 1
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "turbo" in t)
    assert f"{bad}:{line}: axes.moe-runner-backend[4]:" in out.err
    assert "'turbo'" in out.err


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("model: [unclosed\n", "not valid YAML"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_unreadable_matrices_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, words: str
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(content)
    assert main(["plan", str(bad)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and words in out.err and out.err.count("\n") == 1


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(tmp_path / "nope.yml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_facts_fill_auto(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = tmp_path / "m.yml"
    matrix.write_text(SM120.read_text().replace("gpu: sm120", "gpu: auto"))
    assert main(["plan", str(matrix)]) == 2
    assert "hardware.gpu: GPU is auto but no facts" in capsys.readouterr().err
    facts = tmp_path / "facts.json"
    b200 = {"available": True, "sm": "sm100", "sms": ["sm100"], "message": "8 x NVIDIA B200"}
    facts.write_text(json.dumps({"gpu": b200}))
    assert main(["plan", str(matrix), "--facts", str(facts), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"] == "sm100"


@pytest.mark.parametrize(
    ("version", "nearest"),
    [("0.5.24", "the nearest is 0.5.23"), ("0.5.9.post1", "the nearest are 0.5.9 and 0.5.10")],
)
def test_sglang_version_without_a_table_is_refused_naming_the_nearest_releases(
    version: str, nearest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(SM120), "--sglang-version", version]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert f"no flag table for SGLang {version}" in out.err and nearest in out.err
    assert len(out.err.strip().splitlines()) == 1


def test_sglang_version_accepts_every_release_with_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(SM120), "--sglang-version", "0.5.16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sglang_version"] == "0.5.16"
