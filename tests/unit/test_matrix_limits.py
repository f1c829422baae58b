"""Bad input refused at plan time, before anything is expanded (docs/reliability.md, cases 12-14
and 16): non-regular and oversized files, anchor bombs, duplicate keys, too many
combinations, numbers out of range or not finite, and secrets in the matrix."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import matrix, matrix_yaml
from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError, parse
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import catalog
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner
from bwtune.cli import main
from bwtune.matrix_file import MatrixFileError, load, loads

REPO = Path(__file__).resolve().parents[1].parent
EXAMPLE = REPO / "examples" / "qwen35-397b-nvfp4-sm120.yml"


def example() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))


def error_of(raw: dict[str, Any]) -> MatrixError:
    with pytest.raises(MatrixError) as caught:
        parse(raw, catalog.get_table)
    return caught.value


# -- 12: size limits, refused before expanding ------------------------------------------


def test_plan_of_a_device_or_a_fifo_fails_at_once_without_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "matrix.yml"
    os.mkfifo(fifo)  # reading it would block for ever; /dev/zero would fill the memory
    for path in ("/dev/zero", str(fifo), str(tmp_path)):
        assert main(["plan", path]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err.strip().endswith(f"{path}: not a regular file (a matrix is a YAML or JSON file)")


def test_a_file_over_the_size_limit_is_refused_unless_the_limit_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.yml"
    big.write_text(EXAMPLE.read_text() + "#" * matrix_yaml.MAX_BYTES + "\n")
    with pytest.raises(MatrixFileError, match=r"big.yml: larger than 1048576 bytes.*BWTUNE_MATRIX_MAX_BYTES"):
        load(big)
    small = tmp_path / "small.yml"
    small.write_text(EXAMPLE.read_text())
    size = small.stat().st_size
    monkeypatch.setenv(matrix_yaml.BYTES_ENV, str(size - 1))
    with pytest.raises(MatrixFileError, match=f"small.yml: larger than {size - 1} bytes"):
        load(small)
    monkeypatch.setenv(matrix_yaml.BYTES_ENV, str(size))
    assert load(small).data["hardware"]["gpu"] == "sm120"


def anchor_bomb(levels: int) -> str:
    """Each level lists the previous one ten times: 10**levels nodes from a few hundred bytes."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for n in range(1, levels + 1):
        lines.append(f"l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_an_anchor_bomb_is_refused_before_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MatrixFileError, match=r"bomb.yml:\d+: expands to more than 100000 YAML nodes"):
        loads(anchor_bomb(9), "bomb.yml")  # 10**9 nodes once expanded
    loads(anchor_bomb(3), "small.yml")  # aliases themselves are fine
    monkeypatch.setenv(matrix_yaml.NODES_ENV, "500")
    with pytest.raises(MatrixFileError, match="more than 500 YAML nodes"):
        loads(anchor_bomb(3), "small.yml")


def test_an_alias_inside_itself_is_refused() -> None:
    with pytest.raises(MatrixFileError, match=r"loop.yml:1: an alias refers to the node that contains it"):
        loads("axes: &a {tp-size: [*a]}\n", "loop.yml")


def test_too_many_combinations_are_refused_before_expanding_unless_the_matrix_raises_the_limit() -> None:
    raw = example()
    raw["axes"] = {
        "cuda-graph-max-bs-decode": list(range(1, 101)),
        "chunked-prefill-size": list(range(1024, 1124)),
        "max-running-requests": list(range(1, 101)),
    }
    raw["exclude"] = []
    err = error_of(raw)  # 10**6 points: refused before the first is built
    assert err.path == ("axes",)
    assert "1000000 combinations (100 x 100 x 100) is more than the limit of 100000" in str(err)
    assert "limits: {combinations: 1000000}" in str(err)

    small = example()
    small["limits"] = {"combinations": 10}
    assert "72 combinations" in str(error_of(small))
    small["limits"] = {"combinations": 72}
    assert parse(small, catalog.get_table).size() == 72


def test_the_node_reads_a_matrix_file_with_the_same_limits(tmp_path: Path) -> None:
    with pytest.raises(sweep_runner.BadInput, match="matrix: /dev/zero: not a regular file"):
        sweep_runner.SweepOptions(matrix="/dev/zero", results_path=str(tmp_path / "r.jsonl"))
    twice = tmp_path / "m.yml"
    twice.write_text("axes: {}\naxes: {}\n")
    with pytest.raises(
        sweep_runner.BadInput, match=r"m.yml:2: key 'axes' is given twice in one mapping \(lines 1 and 2\)"
    ):
        sweep_runner.SweepOptions(matrix=str(twice), results_path=str(tmp_path / "r.jsonl"))


# -- 13: ranges and finiteness ----------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "value", "words"),
    [
        (("base", "tp-size"), 0, "--tp-size must be between 1 and 1024 (a parallel size), got 0"),
        (("base", "tp-size"), -8, "got -8"),
        (
            ("base", "mem-fraction-static"),
            7.5,
            "--mem-fraction-static must be in (0, 1] (a fraction), got 7.5",
        ),
        (("base", "mem-fraction-static"), 0.0, "got 0.0"),
        (("base", "mem-fraction-static"), math.nan, "--mem-fraction-static must be a finite number, got nan"),
        (("base", "mem-fraction-static"), math.inf, "must be a finite number, got inf"),
        (("base", "max-running-requests"), 10**6, "must be between 1 and 65536"),
        (("base", "chunked-prefill-size"), 10**12, "out of range (at most 2147483647 in size)"),
        (("base", "speculative-num-steps"), 0, "--speculative-num-steps must be between 1 and 64"),
    ],
)
def test_a_flag_out_of_its_range_is_refused_naming_it(where: tuple[str, str], value: Any, words: str) -> None:
    raw = example()
    raw[where[0]][where[1]] = value
    err = error_of(raw)
    assert err.path == where and words in str(err), str(err)


def test_an_axis_value_out_of_range_names_its_index() -> None:
    raw = example()
    raw["base"].pop("tp-size")
    raw["axes"]["tp-size"] = [8, 4, 0]
    err = error_of(raw)
    assert err.path == ("axes", "tp-size", 2) and "got 0" in str(err)


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("num_prompts", 10**12, "num_prompts must be at most 100,000, got 1000000000000"),
        ("repetitions", 10**9, "repetitions must be at most 100, got 1000000000"),
        ("num_prompts", "1e12", "num_prompts must be an integer >= 1, got '1e12'"),
        ("request_rate", math.inf, "request_rate must be a finite number"),
        ("request_rate", math.nan, "request_rate must be a number > 0"),
        ("slo_ttft_ms", math.inf, "slo_ttft_ms must be a number of ms > 0, got inf"),
    ],
)
def test_a_workload_value_out_of_range_is_refused_naming_it(key: str, value: Any, words: str) -> None:
    raw = example()
    raw["workloads"][1][key] = value
    err = error_of(raw)
    assert err.path[:2] == ("workloads", 1) and words in str(err), str(err)


def test_estimates_must_be_finite() -> None:
    raw = example()
    raw["estimates"]["startup_s"] = math.inf
    assert "expected a finite number, got inf" in str(error_of(raw))
    raw = example()
    raw["hardware"]["count"] = 10**9
    assert error_of(raw).path == ("hardware", "count")


# -- 14: duplicate keys -----------------------------------------------------------------


def test_a_duplicate_key_is_refused_with_both_lines(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    path = tmp_path / "twice.yml"
    path.write_text(text + "axes:\n  tp-size: [4, 8]\n")
    first = 1 + next(i for i, line in enumerate(text.splitlines()) if line.startswith("axes:"))
    last = len(text.splitlines()) + 1
    with pytest.raises(MatrixFileError) as caught:
        load(path)
    assert str(caught.value) == (
        f"{path}:{last}: key 'axes' is given twice in one mapping (lines {first} and {last}); "
        "YAML would keep only the last"
    )
    with pytest.raises(MatrixFileError, match=r"x.yml:3: key 'tp-size' is given twice .*\(lines 2 and 3\)"):
        loads("base:\n  tp-size: 8\n  tp-size: 4\n", "x.yml")
    with pytest.raises(matrix_yaml.MatrixTextError, match="key 'axes' is given twice in one JSON object"):
        matrix_yaml.load(json.dumps({"axes": {}})[:-1] + ', "axes": {}}', "x.json")


def test_a_merge_key_is_not_a_duplicate() -> None:
    loaded = loads("shared: &s {tp-size: 8}\nbase:\n  <<: *s\n  quantization: modelopt_fp4\n", "x.yml")
    assert loaded.data["base"] == {"tp-size": 8, "quantization": "modelopt_fp4"}


# -- 16: no secrets in a matrix ---------------------------------------------------------


@pytest.mark.parametrize("place", ["base", "axes"])
def test_an_api_key_in_the_matrix_is_refused_pointing_to_sweep_api_key(place: str) -> None:
    raw = example()
    if place == "base":
        raw["base"]["api-key"] = "sk-secret"
    else:
        raw["axes"]["api-key"] = ["sk-secret"]
    err = error_of(raw)
    assert err.path == ((place, "api-key"))
    assert "sweep_api_key" in str(err) and "sk-secret" not in str(err)
    assert set(matrix.SECRET_FLAGS) >= {"api-key", "admin-api-key"}
