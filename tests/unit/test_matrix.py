"""Matrix validation: every bad input is one error that names the key (and the YAML line)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._plan.matrix import MatrixError, parse
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import catalog
from bwtune.matrix_file import MatrixFileError, load, loads

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "qwen35-397b-nvfp4-sm120.yml"


def example() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))


def error_of(matrix: dict[str, Any], **kwargs: Any) -> MatrixError:
    with pytest.raises(MatrixError) as caught:
        parse(matrix, catalog.get_table, **kwargs)
    return caught.value


def test_the_example_parses_and_expands_minus_excludes() -> None:
    m = parse(example(), catalog.get_table)
    points = list(m.points())
    assert m.size() == 4 * 3 * 3 * 2
    assert len(points) == m.size() - 3 * 3  # triton x mtp3 excluded
    assert all(not (p["moe-runner-backend"] == "triton" and p["speculative"] == "mtp3") for p, _ in points)
    point, flags = points[-1]
    assert point == {
        "moe-runner-backend": "marlin",
        "fp4-gemm-backend": "marlin",
        "attention-backend": "trtllm_mha",
        "speculative": "mtp3",
    }
    assert flags["speculative-algorithm"] == "NEXTN" and flags["tp-size"] == 8


@pytest.mark.parametrize(
    ("edit", "path", "words"),
    [
        (
            lambda m: m["axes"]["moe-runner-backend"].append("flashinfer_turbo"),
            ("axes", "moe-runner-backend", 4),
            "flashinfer_turbo",
        ),
        (
            lambda m: m["axes"].update({"no-such-flag": [1]}),
            ("axes", "no-such-flag"),
            "no flag --no-such-flag",
        ),
        (lambda m: m["axes"].update({"fp4-gemm-backend": []}), ("axes", "fp4-gemm-backend"), "empty axis"),
        (
            lambda m: m["axes"]["speculative"].append("mtp9"),
            ("axes", "speculative", 2),
            "unknown bundle 'mtp9'",
        ),
        (lambda m: m["axes"]["speculative"].append(False), ("axes", "speculative", 2), "boolean false"),
        (
            lambda m: m["base"].update({"kv-cache-dtype": False}),
            ("base", "kv-cache-dtype"),
            "YAML read a bare",
        ),
        (lambda m: m["workloads"][1].pop("output_len"), ("workloads", 1), "missing output_len"),
        (
            lambda m: m["exclude"].append({"speculative": "mtp4"}),
            ("exclude", 1, "speculative"),
            "not a value",
        ),
        (
            lambda m: m["exclude"].append({"kv-cache-dtype": "auto"}),
            ("exclude", 1, "kv-cache-dtype"),
            "not an axis",
        ),
        (lambda m: m["sglang"].update({"version": 0.5}), ("sglang", "version"), "quoted string"),
        (lambda m: m["sglang"].update({"version": "0.4.0"}), ("sglang", "version"), "no flag table"),
        (
            lambda m: m.update({"objective": {"workload": "c64", "metric": "output_throughput"}}),
            ("objective", "workload"),
            "c64",
        ),
        (lambda m: m.update({"axes": {**m["axes"], "tp-size": [4, 8]}}), ("axes", "tp-size"), "both in base"),
        (lambda m: m.update({"extra": 1}), ("extra",), "unknown key"),
    ],
)
def test_bad_input_names_the_key(edit: Any, path: tuple[Any, ...], words: str) -> None:
    matrix = example()
    edit(matrix)
    err = error_of(matrix)
    assert err.path == path
    assert words in str(err)


def test_a_renamed_flag_names_what_the_chosen_release_calls_it() -> None:
    matrix = example()
    bundle = matrix["bundles"]["speculative"]["mtp3"]
    bundle["mamba-scheduler-strategy"] = bundle.pop("mamba-radix-cache-strategy")
    err = error_of(matrix)
    assert err.path == ("bundles", "speculative", "mtp3", "mamba-scheduler-strategy")
    assert "it calls it --mamba-radix-cache-strategy" in err.message


def without_marlin(matrix: dict[str, Any]) -> dict[str, Any]:
    """The example less the `marlin` choices, which 0.5.9 lacks for both flags."""
    for axis in ("moe-runner-backend", "fp4-gemm-backend"):
        matrix["axes"][axis] = [v for v in matrix["axes"][axis] if v != "marlin"]
    return matrix


def test_the_older_release_names_the_older_flag() -> None:
    err = error_of(without_marlin(example()), sglang_version="0.5.9")
    assert err.path == ("bundles", "speculative", "mtp3", "mamba-radix-cache-strategy")
    assert "--mamba-scheduler-strategy" in err.message


def test_the_older_release_refuses_a_choice_it_lacks() -> None:
    err = error_of(example(), sglang_version="0.5.9")
    assert err.path == ("axes", "moe-runner-backend", 3)
    assert "no choice 'marlin'" in err.message and "SGLang 0.5.9" in err.message
    matrix = without_marlin(example())
    matrix["axes"]["fp4-gemm-backend"].append("flashinfer_cutedsl")
    assert parse(matrix, catalog.get_table, sglang_version="0.5.23").size() == 3 * 3 * 3 * 2  # 0.5.23 has it
    mtp3 = matrix["bundles"]["speculative"]["mtp3"]
    mtp3["mamba-scheduler-strategy"] = mtp3.pop("mamba-radix-cache-strategy")
    err = error_of(matrix, sglang_version="0.5.9")
    assert err.path == ("axes", "fp4-gemm-backend", 2)
    assert "no choice 'flashinfer_cutedsl'" in err.message


def test_auto_needs_facts_and_takes_them_when_given() -> None:
    matrix = example()
    matrix["hardware"]["gpu"] = "auto"
    matrix["sglang"]["version"] = "auto"
    assert "no facts" in error_of(matrix).message
    # The layout the facts modules return (docs/facts.md); test_planner_facts.py has the rest.
    facts = {
        "gpu": {"available": True, "sm": "sm100", "sms": ["sm100"], "message": "8 x NVIDIA B200"},
        "stack": {"sglang": {"installed": True, "version": "0.5.23"}},
    }
    m = parse(matrix, catalog.get_table, facts=facts)
    assert (m.gpu, m.sglang_version) == ("sm100", "0.5.23")


def test_yaml_lines_are_kept_for_error_messages(tmp_path: Path) -> None:
    mf = load(EXAMPLE)
    lines = EXAMPLE.read_text().splitlines()
    line = mf.line_of(("axes", "moe-runner-backend", 2))
    assert line is not None and "moe-runner-backend:" in lines[line - 1]
    bundle_line = mf.line_of(("bundles", "speculative", "mtp3", "speculative-num-steps"))
    assert bundle_line is not None and "speculative-num-steps: 3" in lines[bundle_line - 1]
    assert mf.where(("axes", "nope")) == f"{EXAMPLE}:{mf.line_of(('axes',))}"


def test_unreadable_and_invalid_yaml_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(MatrixFileError, match="cannot read"):
        load(tmp_path / "missing.yml")
    with pytest.raises(MatrixFileError, match=r"x\.yml:3: not valid YAML"):
        loads("axes:\n  a: [1, 2\n  b: 3\n", "x.yml")
