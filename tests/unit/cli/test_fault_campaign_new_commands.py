"""The fault campaign over the newest commands (recipe, bisect, demo): bad input is one line
naming the value and where it is, exit 2, no traceback, nothing run on a host; a recipe
never carries a secret, and a tuning flag is never taken for one. docs/reliability.md's
cases 57 to 66 name these tests.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bwtune import cli, exit_codes, store
from bwtune.recipes import recipe_file
from tests.unit.db.sample_results import sample_results
from tests.unit.recipes.recipe_store import RUN, STACK, make_store


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def _lines(extra_argv: list[str] | None = None) -> list[dict[str, Any]]:
    found = sample_results(RUN)
    for line in found:
        line["stack"] = dict(STACK)
        if extra_argv:
            line["argv"] = [*line["argv"], *extra_argv]
    return found


@pytest.fixture
def db(home: Path) -> Iterator[sqlite3.Connection]:
    conn = make_store(home / "results.db", _lines())
    yield conn
    conn.close()


@pytest.fixture
def recipe(db: sqlite3.Connection) -> dict[str, Any]:
    return json.loads(recipe_file.dumps(recipe_file.build(db, RUN)))


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n      bwtune_simulated: true\n"
    )
    return path


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))  # a traceback would raise here
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _set(recipe: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    changed = json.loads(json.dumps(recipe))
    *parents, last = dotted.split(".")
    target = changed
    for key in parents:
        target = target[key]
    target[last] = value
    return changed


WRONG_TYPES = [
    ("measured", "x", "measured is not an object"),
    ("hardware", [1], "hardware is not an object"),
    ("objective", "max", "objective is not an object"),
    ("workloads", "chat", "workloads is not a list of objects"),
    ("launch.argv", [1, 2], "launch.argv is not a list of strings"),
    ("results.launches", ["x"], "results.launches is not a list of objects"),
    ("measured.config_id", 7, "measured.config_id is not a string"),
]


@pytest.mark.parametrize(("field", "value", "said"), WRONG_TYPES, ids=[w[0] for w in WRONG_TYPES])
@pytest.mark.parametrize("action", ["check", "apply", "verify"])
def test_a_recipe_field_of_the_wrong_type_is_refused_before_any_host(
    tmp_path: Path,
    home: Path,
    recipe: dict[str, Any],
    inventory: Path,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: Any,
    said: str,
    action: str,
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_set(recipe, field, value)))
    code, out, err = _main(capsys, "recipe", action, str(path), "-i", str(inventory))
    assert code == exit_codes.BAD_INPUT
    assert _one_line(err) == f"bwtune recipe {action}: {path}: not a bwtune recipe: {said}"
    assert out == ""
    assert not (home / "runs").exists()  # nothing launched, no run started


def test_a_recipe_nested_too_deep_is_one_line_for_every_action(
    tmp_path: Path, home: Path, inventory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    for argv in (
        ["recipe", "verify", str(path), "-i", str(inventory)],
        ["recipe", "check", str(path), "-i", str(inventory)],
        ["recipe", "sign", str(path), "--key", str(tmp_path / "no-key")],
    ):
        code, _out, err = _main(capsys, *argv)
        assert code == exit_codes.BAD_INPUT
        assert _one_line(err).endswith(f"{path}: not a bwtune recipe: nested too deep to be one")


def test_a_signature_check_of_a_file_nested_too_deep_is_not_verified_not_a_traceback(
    tmp_path: Path, recipe: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from bwtune.recipes import signing

    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(signing.SigningError, match="nested too deep"):
        signing.manifest(path.read_bytes())


def test_a_file_too_large_to_be_a_recipe_is_refused_unread(
    tmp_path: Path, home: Path, inventory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "huge.json"
    with open(path, "wb") as handle:
        handle.truncate(recipe_file.MAX_BYTES + 1)  # sparse: no disk, no time
    code, _out, err = _main(capsys, "recipe", "verify", str(path), "-i", str(inventory))
    assert code == exit_codes.BAD_INPUT
    assert _one_line(err) == (
        f"bwtune recipe verify: {path}: {recipe_file.MAX_BYTES + 1} bytes, not a recipe "
        "(a recipe is a few kilobytes)"
    )


def test_tuning_flags_with_token_in_their_name_are_exported_with_their_values(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "hf_live_0123456789"
    extra = ["--max-total-tokens", "4096", "--tokenizer-path", "/models/tok", "--hf-token", secret,
             "--api-key=sk-9"]  # fmt: skip
    make_store(home / "results.db", _lines(extra)).close()
    out = tmp_path / "r.json"
    code, _stdout, err = _main(capsys, "recipe", "export", RUN, "-o", str(out))
    assert code == exit_codes.OK, err
    text = out.read_text()
    argv = json.loads(text)["launch"]["argv"]
    assert argv[argv.index("--max-total-tokens") + 1] == "4096"
    assert argv[argv.index("--tokenizer-path") + 1] == "/models/tok"
    assert argv[argv.index("--hf-token") + 1] == recipe_file.REDACTED
    assert "--api-key=REDACTED" in argv
    assert secret not in text and "sk-9" not in text


@pytest.mark.parametrize("action", ["apply", "verify", "check"])
def test_a_recipe_whose_argv_holds_a_secret_is_refused_and_the_secret_not_shown(
    tmp_path: Path,
    home: Path,
    recipe: dict[str, Any],
    inventory: Path,
    capsys: pytest.CaptureFixture[str],
    action: str,
) -> None:
    secret = "sk-hand-edited-42"
    path = tmp_path / "secret.json"
    path.write_text(
        json.dumps(_set(recipe, "launch.argv", [*recipe["launch"]["argv"], "--hf-token", secret]))
    )
    code, out, err = _main(capsys, "recipe", action, str(path), "-i", str(inventory))
    assert code == exit_codes.BAD_INPUT
    line = _one_line(err)
    assert line.startswith(
        f"bwtune recipe {action}: {path}: not a bwtune recipe: launch.argv gives --hf-token"
    )
    assert secret not in out + err
    assert not (home / "runs").exists()


def test_an_exported_recipe_still_loads_with_its_redacted_api_key(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(home / "results.db", _lines(["--api-key", "sk-1"])).close()
    out = tmp_path / "r.json"
    assert _main(capsys, "recipe", "export", RUN, "-o", str(out))[0] == exit_codes.OK
    assert "--api-key" in recipe_file.load(str(out))["launch"]["argv"]


def test_export_names_sign_key_when_the_key_cannot_sign(
    tmp_path: Path, db: sqlite3.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "not-a-key"
    key.write_text("not an SSH key\n")
    out = tmp_path / "r.json"
    code, stdout, err = _main(capsys, "recipe", "export", RUN, "-o", str(out), "--sign-key", str(key))
    assert code == exit_codes.BAD_INPUT
    assert _one_line(err).startswith(f"bwtune recipe export: --sign-key {key}: ssh-keygen could not sign")
    assert "the recipe itself is written, unsigned" in err and out.is_file()
    assert not Path(f"{out}.sig").exists() and "signature:" not in stdout


@pytest.mark.parametrize("where", ["a folder", "under a file"])
def test_an_attestation_that_cannot_be_written_is_refused_before_any_launch(
    tmp_path: Path,
    home: Path,
    recipe: dict[str, Any],
    inventory: Path,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(recipe))
    (tmp_path / "a-file").write_text("")
    target = tmp_path if where == "a folder" else tmp_path / "a-file" / "sub" / "att.md"
    code, out, err = _main(
        capsys, "recipe", "verify", str(path), "-i", str(inventory), "--attestation", str(target)
    )
    assert code == exit_codes.BAD_INPUT
    said = (
        "is a folder; name the file to write"
        if where == "a folder"
        else f"{tmp_path / 'a-file'} is not a folder"
    )
    assert _one_line(err) == f"bwtune recipe verify: --attestation {target}: {said}"
    assert out == "" and not (home / "runs").exists()
    assert store.default_db_path().exists()  # the fixture's database, untouched: no scratch run in it
    conn = store.connect_readonly(store.default_db_path())
    try:
        assert [r["run_id"] for r in store.list_runs(conn)] == [RUN]
    finally:
        conn.close()


def test_bisect_names_the_candidates_file_a_list_does_not_fit(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.regression.history_lines import STACK as RUN_STACK
    from tests.unit.regression.history_lines import stack, store_run

    conn = store.connect(home / "results.db")
    store_run(conn, "good-1", 1, {"cprod000001": 1000.0}, launches=3, seed=1)
    store_run(conn, "bad-1", 2, {"cprod000001": 850.0}, launches=3, seed=2,
              stack_components=stack(torch="2.11.0"))  # fmt: skip
    conn.close()
    good_torch = RUN_STACK["torch"]
    candidates = tmp_path / "c.yml"
    candidates.write_text(f'torch: ["{good_torch}", "2.10.5", "2.10.5", "2.11.0"]\n')
    code, _out, err = _main(capsys, "bisect", "good-1", "bad-1", "--candidates", str(candidates))
    assert code == exit_codes.BAD_INPUT
    assert (
        _one_line(err)
        == f"bwtune bisect: --candidates {candidates}: candidates for torch: 2.10.5 is listed twice"
    )


def test_demo_resume_of_a_run_never_started_says_so(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _main(capsys, "demo", "--resume", "r-never")
    assert code == exit_codes.BAD_INPUT
    line = _one_line(err)
    assert line.startswith("bwtune: demo: --resume r-never: no run r-never was started from here")
    assert not (home / "runs" / "r-never").exists()


def test_import_into_a_home_that_is_a_file_says_so_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.write_text("")  # BWTUNE_HOME is a file
    monkeypatch.setenv("BWTUNE_HOME", str(home))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in _lines()))
    code, out, err = _main(capsys, "import", str(results))
    assert code == exit_codes.BAD_INPUT
    assert _one_line(err) == (
        f"bwtune import: results database {home / 'results.db'}: cannot create it: "
        f"{home} is a file, not a folder"
    )
    assert out == "" and home.read_text() == ""


HELD_RECIPES = [
    ("empty", "", "not JSON (Expecting value: line 1 column 1 (char 0))"),
    ("not-json", "not json {", "not JSON (Expecting value: line 1 column 1 (char 0))"),
    ("a-list", "[]", "not a bwtune recipe: a recipe is a JSON object"),
]


@pytest.mark.parametrize(("name", "text", "said"), HELD_RECIPES, ids=[h[0] for h in HELD_RECIPES])
def test_held_a_recipe_file_that_is_not_one_is_one_line(
    tmp_path: Path,
    home: Path,
    inventory: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    text: str,
    said: str,
) -> None:
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    code, _out, err = _main(capsys, "recipe", "check", str(path), "-i", str(inventory))
    assert code == exit_codes.BAD_INPUT
    assert _one_line(err) == f"bwtune recipe check: {path}: {said}"


def test_held_another_schema_a_truncated_file_and_bad_launches_are_one_line(
    tmp_path: Path, home: Path, recipe: dict[str, Any], inventory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = tmp_path / "schema2.json"
    newer.write_text(json.dumps({**recipe, "schema": 2}))
    text = recipe_file.dumps(recipe)
    truncated = tmp_path / "truncated.json"
    truncated.write_text(text[: len(text) // 2])
    good = tmp_path / "good.json"
    good.write_text(text)
    schema_said = f"{newer}: not a bwtune recipe: schema 2: this bwtune reads recipe schema 1"
    cases = [
        (["recipe", "check", str(newer)], schema_said),
        (["recipe", "apply", str(truncated)], f"{truncated}: not JSON ("),
    ]
    for n in ("0", "-1", "1000"):
        cases.append((["recipe", "verify", str(good), "--launches", n], f"--launches {n}: between 1 and 20"))
    for argv, said in cases:
        code, _out, err = _main(capsys, *argv, "-i", str(inventory))
        assert code == exit_codes.BAD_INPUT, argv
        assert _one_line(err).startswith(f"bwtune recipe {argv[1]}: {said}")
    assert not (home / "runs").exists()


def test_held_export_into_a_missing_folder_writes_nothing(
    tmp_path: Path, db: sqlite3.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "missing" / "r.json"
    code, _stdout, err = _main(capsys, "recipe", "export", RUN, "-o", str(out))
    assert code == exit_codes.BAD_INPUT
    assert _one_line(err) == f"bwtune recipe export: -o {out}: cannot write it (No such file or directory)"
    assert not out.parent.exists()


def test_import_of_an_empty_file_or_a_lone_torn_line_is_refused_and_stores_nothing(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty, torn = tmp_path / "empty.jsonl", tmp_path / "torn.jsonl"
    empty.write_text("")
    torn.write_text(json.dumps(_lines()[0])[:40])  # killed mid-write of the first line
    for path in (empty, torn):
        code, out, err = _main(capsys, "import", str(path))
        assert code == exit_codes.BAD_INPUT
        assert err.splitlines()[-1] == f"bwtune import: {path}: no results line in it; nothing imported"
        assert "imported" not in out
    assert not (home / "results.db").exists()


def test_held_import_of_a_folder_and_of_a_future_schema_line_stores_nothing(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    future = tmp_path / "future.jsonl"
    first, second = _lines()[:2]
    future.write_text(json.dumps(first) + "\n" + json.dumps({**second, "schema": 99}) + "\n")
    for path, said in ((tmp_path, f"{tmp_path}: not a regular file"),
                       (future, f"{future}:2: schema 99 is not supported (expected 1)")):  # fmt: skip
        code, _out, err = _main(capsys, "import", str(path))
        assert code == exit_codes.BAD_INPUT
        assert _one_line(err) == f"bwtune import: {said}"
    assert not (home / "results.db").exists()
