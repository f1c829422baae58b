"""`bwtune recipe verify`'s logic: the one-config matrix from a recipe, and the verdict of a
scratch run's launches against the recipe's numbers (bwtune.regression.compare)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from bwtune import store
from bwtune.recipes import recipe_file, verify
from tests.unit.db.sample_results import sample_results
from tests.unit.recipes.recipe_store import RUN

SCRATCH = "scratch-1"


@pytest.fixture
def recipe(db: sqlite3.Connection) -> dict[str, Any]:
    return recipe_file.build(db, RUN)


def scratch_run(
    conn: sqlite3.Connection, recipe: dict[str, Any], speed: float, seeds: tuple[int, ...]
) -> None:
    """The recipe's config launched once per seed in run SCRATCH (later launches re-measure)."""
    measured = recipe["measured"]
    for n, seed in enumerate(seeds):
        (line,) = [
            line
            for line in sample_results(SCRATCH, seed=seed, speed_scale=speed)
            if (line["host"], line["config_id"]) == (measured["host"], measured["config_id"])
        ]
        line["finished_at"] = f"2026-12-01T10:0{n}:00+00:00"
        store.import_results(conn, [line])


def test_the_matrix_launches_the_recipes_argv(recipe: dict[str, Any]) -> None:
    matrix = verify.matrix_of(recipe)
    assert matrix["axes"] == {} and "model-path" not in matrix["base"]
    assert matrix["model"]["path"] == recipe["checkpoint"]["path"]
    assert matrix["objective"] == recipe["objective"]
    assert matrix["base"] == {k: v for k, v in recipe["launch"]["flags"].items() if k != "model-path"}
    assert matrix["workloads"] == recipe["workloads"]
    assert verify.matrix_of(recipe, "/other/model")["model"]["path"] == "/other/model"


def test_a_flag_sglang_sets_itself_is_not_passed() -> None:
    flags = {"tp-size": 8, "trust-remote-code": True, "mamba-radix-cache-strategy": "extra_buffer"}
    launch = {"argv": ["--model-path", "/m", "--tp-size", "8", "--trust-remote-code"], "flags": flags}
    assert verify.argv_flags(launch) == {"tp-size": 8, "trust-remote-code": True}


def test_a_redacted_secret_is_not_launched(recipe: dict[str, Any]) -> None:
    recipe["launch"]["argv"] += ["--api-key", recipe_file.REDACTED]
    with pytest.raises(recipe_file.RecipeError, match="redacted secret"):
        verify.matrix_of(recipe)


def test_the_same_speed_is_reproduced(db: sqlite3.Connection, recipe: dict[str, Any]) -> None:
    scratch_run(db, recipe, 1.0, (11, 12, 13))
    outcome = verify.judge(db, recipe, SCRATCH)
    assert outcome.verdict == verify.REPRODUCED, outcome
    assert len(outcome.candidate) == 3 and outcome.line.startswith("reproduced (")


def test_a_slower_node_is_slower_by_its_change_with_p(db: sqlite3.Connection, recipe: dict[str, Any]) -> None:
    scratch_run(db, recipe, 0.75, (11, 12, 13))
    outcome = verify.judge(db, recipe, SCRATCH)
    assert outcome.verdict == verify.SLOWER, outcome
    assert outcome.change is not None and -0.35 < outcome.change < -0.15
    assert outcome.line == f"slower by {abs(outcome.change) * 100:.1f}% (p={outcome.p_value:.3g})"


def test_a_drop_the_launch_noise_cannot_confirm_is_inconclusive_not_reproduced(
    db: sqlite3.Connection, recipe: dict[str, Any]
) -> None:
    """Two launches 9% apart (the run's own noise under max_noise) both well below the recipe:
    the test sees a drop, the launch noise with one degree of freedom cannot confirm it.
    The numbers moved, so this is never "reproduced" (a loaded verifier once read -21.9% so)."""
    measured = recipe["measured"]
    for n, (seed, speed) in enumerate(((11, 0.80), (12, 0.88))):
        (line,) = [
            line
            for line in sample_results(SCRATCH, seed=seed, speed_scale=speed)
            if (line["host"], line["config_id"]) == (measured["host"], measured["config_id"])
        ]
        line["finished_at"] = f"2026-12-01T10:0{n}:00+00:00"
        store.import_results(db, [line])
    outcome = verify.judge(db, recipe, SCRATCH)
    assert outcome.change is not None and outcome.change < -0.1
    assert outcome.verdict == verify.INCONCLUSIVE, outcome
    assert outcome.line.startswith("inconclusive (") and "within the noise" in outcome.line


def test_a_faster_node_is_faster(db: sqlite3.Connection, recipe: dict[str, Any]) -> None:
    scratch_run(db, recipe, 1.3, (11, 12, 13))
    assert verify.judge(db, recipe, SCRATCH).verdict == verify.FASTER


def test_every_launch_failing_could_not_run_with_the_reason(
    db: sqlite3.Connection, recipe: dict[str, Any]
) -> None:
    oom = next(line for line in sample_results(SCRATCH) if line["status"] == "oom")
    oom["config_id"] = recipe["measured"]["config_id"]
    store.import_results(db, [oom])
    outcome = verify.judge(db, recipe, SCRATCH)
    assert outcome.verdict == verify.COULD_NOT_RUN
    assert outcome.line.startswith("could not run (oom: torch.OutOfMemoryError")


def test_the_attestation_puts_both_sets_of_numbers_side_by_side(
    db: sqlite3.Connection, recipe: dict[str, Any]
) -> None:
    scratch_run(db, recipe, 0.75, (11, 12))
    outcome = verify.judge(db, recipe, SCRATCH)
    hosts = [{"host": "gpu-z", "gpu_facts": {"gpus": "8 x RTX", "sm": "sm120"}, "stack_fingerprint": "abc"}]
    text = verify.attestation(
        recipe, "r.json", outcome, hosts, simulated_hosts=True, when="2026-12-01T11:00:00+00:00"
    )
    assert text.startswith(f"# Recipe verification: {outcome.line}\n")
    assert "| gpu-z | 8 x RTX | sm120 |" in text
    assert f"| recorded | {len(outcome.reference)} |" in text and "| verified | 2 |" in text
    assert "SIMULATED" in text


def test_a_stack_input_the_launches_ran_with_otherwise_is_named(
    db: sqlite3.Connection, recipe: dict[str, Any]
) -> None:
    measured = recipe["measured"]
    (line,) = [
        line
        for line in sample_results(SCRATCH, seed=11)
        if (line["host"], line["config_id"]) == (measured["host"], measured["config_id"])
    ]
    line["stack"] = {**recipe["stack"]["components"], "sglang_commit": "c" * 40, "fingerprint": "x"}
    store.import_results(db, [line])
    outcome = verify.judge(db, recipe, SCRATCH)
    assert [(d["name"], d["host"]) for d in outcome.differ] == [("sglang_commit", "c" * 40)]
    text = verify.attestation(recipe, "r.json", outcome, [], simulated_hosts=True, when="now")
    assert f"- SGLang commit: {'c' * 40} here, the recipe's {'a' * 40}" in text
