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


def _wide_matrix(tmp_path: Path) -> Path:
    """The SM120 example with a fifth axis: 288 combinations, 252 configs (over SUMMARY_OVER)."""
    text = SM120.read_text()
    text = text.replace(", mem-fraction-static: 0.85}", "}")
    text = text.replace(
        "  speculative: [none, mtp3]",
        "  speculative: [none, mtp3]\n  mem-fraction-static: [0.8, 0.83, 0.86, 0.89]",
    )
    path = tmp_path / "wide.yml"
    path.write_text(text)
    return path


def _rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("c") and len(line.split()[0]) == 11]


def test_a_large_plan_prints_a_summary_and_says_how_to_see_every_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bwtune.commands.plan import SUMMARY_OVER, SUMMARY_ROWS

    matrix = _wide_matrix(tmp_path)
    assert main(["plan", str(matrix), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    configs = plan["configs"]
    assert len(configs) > SUMMARY_OVER
    assert main(["plan", str(matrix)]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    launches = [c["id"] for c in configs if c["status"] == "valid"]
    # The first launches, in plan order, and no pruned or duplicate row.
    assert [row.split()[0] for row in rows] == launches[:SUMMARY_ROWS]
    assert all(row.split()[-1] == "valid" for row in rows)
    s = plan["summary"]
    assert f"{s['expanded']} configs ({s['combinations']} combinations" in out
    assert f"{s['valid']} valid, {s['pruned']} pruned, {s['duplicates']} duplicates" in out
    assert "GPU-hours" in out and "by strategy: grid" in out
    # Every reason, with how many configs it prunes.
    reasons: dict[str, int] = {}
    for config in configs:
        for key in {f"{r['kind']}: {r['rule']}" for r in config["reasons"]}:
            reasons[key] = reasons.get(key, 0) + 1
    assert reasons
    for reason, count in reasons.items():
        assert any(line.split() == [str(count), *reason.split()] for line in out.splitlines()), reason
    last = out.splitlines()[-1]
    assert last.startswith(f"{len(rows)} of {len(configs)} rows shown (the first {len(rows)} launches")
    assert "--all shows every row" in last


def test_all_prints_every_row_of_a_large_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = _wide_matrix(tmp_path)
    assert main(["plan", str(matrix), "--all"]) == 0
    out = capsys.readouterr().out
    assert len(_rows(out)) == 252 and "252 configs (288 combinations, 36 excluded)" in out
    assert "--all" not in out and "pruned by" not in out


def test_a_small_plan_prints_every_row_as_with_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(SM120)]) == 0
    out = capsys.readouterr().out
    assert main(["plan", str(SM120), "--all"]) == 0
    assert capsys.readouterr().out == out
    assert len(_rows(out)) == 63 and "--all" not in out
    assert out.splitlines()[-1].startswith("by strategy: ")
