"""Where a matrix file is found and what its relative model.path means (CLI and plain Ansible alike)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import matrix_source
from bwtune import matrix_file


def test_a_relative_path_is_found_in_the_current_directory_before_the_playbooks(tmp_path: Path) -> None:
    cwd, playbooks = tmp_path / "cwd", tmp_path / "playbooks"
    for folder in (cwd, playbooks):
        (folder / "m").mkdir(parents=True)
        (folder / "m" / "x.yml").write_text("{}")
    assert matrix_source.locate("m/x.yml", [str(playbooks)], cwd=str(cwd)) == str(cwd / "m" / "x.yml")
    (cwd / "m" / "x.yml").unlink()
    assert matrix_source.locate("m/x.yml", [str(playbooks)], cwd=str(cwd)) == str(playbooks / "m" / "x.yml")


def test_a_missing_file_names_every_place_looked(tmp_path: Path) -> None:
    with pytest.raises(matrix_source.MatrixSourceError) as err:
        matrix_source.locate("nope.yml", [str(tmp_path / "pb")], cwd=str(tmp_path))
    assert str(err.value) == (
        f"nope.yml: cannot read: no such file (looked for {tmp_path / 'nope.yml'}, "
        f"{tmp_path / 'pb' / 'nope.yml'})"
    )
    with pytest.raises(matrix_source.MatrixSourceError, match=r"cannot read: no such file$"):
        matrix_source.locate(str(tmp_path / "abs.yml"))


def test_model_path_is_relative_to_the_matrix_file(tmp_path: Path) -> None:
    matrix = {"model": {"path": "models/m", "architecture": "A"}, "axes": {}}
    resolved = matrix_source.resolve_model_path(matrix, str(tmp_path / "sub" / "matrix.yml"))
    assert resolved["model"] == {
        "path": os.path.realpath(tmp_path / "sub" / "models" / "m"),
        "architecture": "A",
    }
    assert matrix["model"]["path"] == "models/m"  # the caller's matrix is left as it was
    for kept in ("/abs/m", "~/models/m", ""):
        same = {"model": {"path": kept}}
        assert matrix_source.resolve_model_path(same, str(tmp_path / "m.yml")) == same
    assert matrix_source.resolve_model_path(["not", "a", "matrix"], "m.yml") == ["not", "a", "matrix"]


def test_the_cli_reads_a_matrix_by_the_same_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mx").mkdir()
    (tmp_path / "mx" / "m.yml").write_text("model: {path: ckpt}\n")
    monkeypatch.chdir(tmp_path)
    loaded = matrix_file.load("mx/m.yml")
    assert loaded.data["model"]["path"] == os.path.realpath(tmp_path / "mx" / "ckpt")
    assert str(loaded.path) == "mx/m.yml"  # errors keep naming the file as the user gave it
