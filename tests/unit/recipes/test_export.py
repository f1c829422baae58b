"""`bwtune recipe export`: the recipe of a run's best config (or one named), from the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import jsonschema
import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import cli, exit_codes, store
from bwtune.recipes import recipe_file
from tests.unit.recipes.recipe_store import GPU_FACTS, RUN, STACK, make_store

REPO = Path(__file__).parents[3]
SCHEMA = json.loads((REPO / "docs" / "recipe.schema.json").read_text())


def test_the_default_config_is_the_runs_best_by_pick_best(db: sqlite3.Connection) -> None:
    recipe = recipe_file.build(db, RUN)
    objective = store.resolved_objective(db, RUN)
    best = contract.pick_best(store.run_results(db, RUN), objective)
    assert best is not None
    assert recipe["measured"]["config_id"] == best["config_id"]
    assert recipe["measured"]["host"] == best["host"]
    assert recipe["launch"]["argv"] == best["argv"]
    assert recipe["objective"] == objective


def test_a_recipe_holds_what_the_run_recorded(db: sqlite3.Connection) -> None:
    recipe = recipe_file.build(db, RUN)
    assert recipe["schema"] == recipe_file.SCHEMA and recipe["kind"] == recipe_file.KIND
    assert recipe["simulated"] is True and "simulated" in recipe["measured"]["by"]
    hardware = recipe["hardware"]
    assert (hardware["gpu"], hardware["model"], hardware["count"], hardware["driver"], hardware["cuda"]) == (
        "sm120",
        GPU_FACTS["gpus"],
        8,
        "580.95.05",
        "13.0",
    )
    assert recipe["stack"]["components"] == {k: v for k, v in STACK.items() if k != "fingerprint"}
    assert recipe["stack"]["fingerprint"] == "sha256:5f1c0a9e3b7d"
    assert recipe["checkpoint"]["path"] == "/models/Qwen3.5-397B-A17B-NVFP4"
    assert recipe["checkpoint"]["recorded"] is False  # no revision or shard hashes: said, not guessed
    assert recipe["gate"]["passed"] is True and recipe["gate"]["gate_s"] == 3.1
    assert [w["name"] for w in recipe["workloads"]] == ["chat-1k", "long-8k"]


def test_each_launch_has_its_values_and_interval_and_the_pooled_value_is_the_stores(
    db: sqlite3.Connection,
) -> None:
    # Config measured on gpu-a and re-measured on gpu-b: export the one on gpu-b by its id.
    output = store.build_run_output(db, RUN)
    chosen = next(r for r in output["results"] if r["host"] == "gpu-b" and r["status"] == "ok")
    recipe = recipe_file.build(db, RUN, chosen["id"], host="gpu-b")
    assert recipe["measured"]["host"] == "gpu-b"
    launches = recipe["results"]["launches"]
    assert launches and all(len(launch["values"]) == 3 for launch in launches)
    for launch in launches:
        mean, ci95, _cv = contract.mean_ci95(launch["values"])
        assert launch["mean"] == pytest.approx(mean) and launch["ci95"] == pytest.approx(list(ci95 or ()))
    assert recipe["results"]["objective_value"] == pytest.approx(chosen["objective"])


def test_an_exported_recipe_is_valid_against_the_committed_json_schema(db: sqlite3.Connection) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    recipe = json.loads(recipe_file.dumps(recipe_file.build(db, RUN)))
    jsonschema.validate(recipe, SCHEMA)
    assert list(recipe) == list(recipe_file.FIELDS) == SCHEMA["required"]


def test_secrets_never_reach_the_file(tmp_path: Path, lines: list[dict]) -> None:
    secret = "sk-live-0123456789abcdef"
    for line in lines:
        line["argv"] = [*line["argv"], "--api-key", secret, f"--hf-token={secret}"]
        line["environment"] = {"HF_TOKEN": secret, "CUDA_VISIBLE_DEVICES": "0,1"}
    conn = make_store(tmp_path / "secret.db", lines)
    try:
        text = recipe_file.dumps(recipe_file.build(conn, RUN))
    finally:
        conn.close()
    assert secret not in text
    recipe = json.loads(text)
    assert recipe["launch"]["argv"][-3:] == [
        "--api-key",
        recipe_file.REDACTED,
        f"--hf-token={recipe_file.REDACTED}",
    ]
    assert recipe["launch"]["environment"] == ["CUDA_VISIBLE_DEVICES", "HF_TOKEN"]


def test_a_real_runs_recipe_says_not_simulated(tmp_path: Path, lines: list[dict]) -> None:
    for line in lines:
        line["simulated"] = False
    conn = make_store(tmp_path / "real.db", lines)
    try:
        recipe = recipe_file.build(conn, RUN)
    finally:
        conn.close()
    assert recipe["simulated"] is False and recipe["measured"]["by"] == "SGLang"


def test_the_cli_writes_the_file_and_refuses_bad_input_in_one_line(
    tmp_path: Path, db: sqlite3.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.db"
    out = tmp_path / "recipe.json"
    assert cli.main(["recipe", "export", RUN, "-o", str(out), "--db", str(path)]) == exit_codes.OK
    assert json.loads(out.read_text())["measured"]["run_id"] == RUN
    assert "SIMULATED" in capsys.readouterr().out
    for argv, words in (
        (["recipe", "export", "no-such-run", "-o", str(tmp_path / "x.json")], "no run 'no-such-run'"),
        (["recipe", "export", RUN, "--config", "cnope", "-o", str(tmp_path / "x.json")], "--config cnope"),
        (["recipe", "export", RUN, "-o", str(tmp_path / "x.json"), "--sign-key", "/no/key"], "--sign-key"),
    ):
        assert cli.main([*argv, "--db", str(path)]) == exit_codes.BAD_INPUT
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "x.json").exists()


def test_a_failed_config_is_not_exported(db: sqlite3.Connection) -> None:
    failed = next(r for r in store.build_run_output(db, RUN)["results"] if r["status"] == "oom")
    with pytest.raises(recipe_file.RecipeError, match="status oom"):
        recipe_file.build(db, RUN, failed["id"])


def test_a_re_measured_config_keeps_every_launch_oldest_first(db: sqlite3.Connection) -> None:
    first = recipe_file.build(db, RUN)
    host, config_id = first["measured"]["host"], first["measured"]["config_id"]
    line = next(r for r in store.run_results(db, RUN) if (r["host"], r["config_id"]) == (host, config_id))
    again = json.loads(json.dumps(line))
    again["finished_at"] = "2026-11-30T12:00:00+00:00"
    for block in again["metrics"].values():
        for repetition in block.get("repetitions") or []:
            repetition["output_throughput"] *= 1.01
    store.import_results(db, [again])
    recipe = recipe_file.build(db, RUN, config_id, host=host)
    launches = recipe["results"]["launches"]
    assert [launch["launch"] for launch in launches] == [1, 2]
    assert launches[1]["finished_at"] == "2026-11-30T12:00:00+00:00"
    assert launches[1]["mean"] == pytest.approx(launches[0]["mean"] * 1.01)
