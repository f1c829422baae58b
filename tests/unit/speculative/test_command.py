"""`bwtune speculative`: bad input is one line naming the value, exit 2, nothing launched."""

from __future__ import annotations

from pathlib import Path

import pytest

from bwtune import exit_codes, results_db
from bwtune.cli import main
from tests.unit.regression.history_lines import OBJECTIVE, line

REPO = Path(__file__).resolve().parents[3]
INVENTORY = str(REPO / "inventory" / "local.yml")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    return tmp_path


def store(run_id: str, status: str = "ok") -> None:
    conn = results_db.connect()
    results_db.record_run(conn, run_id, objective=OBJECTIVE)
    results_db.import_results(conn, [line(run_id, "cbase0000001", 1, [100.0, 101.0], status=status)])
    conn.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "1,x"], "bwtune: speculative: --steps '1,x': 'x' is not a whole number"),
        (["--topk", "2.5"], "bwtune: speculative: --topk '2.5': '2.5' is not a whole number"),
    ],
)
def test_a_bad_grid_value(
    home: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["speculative", "r1", "-i", INVENTORY, *args]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err == message


def test_an_unknown_base_run(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store("r-other")
    assert main(["speculative", "r-none", "-i", INVENTORY]) == exit_codes.BAD_INPUT
    assert (
        capsys.readouterr().err.strip()
        == "bwtune: speculative: base run r-none: no such run in the results database"
    )


def test_a_base_run_without_an_ok_config(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store("r-failed", status="oom")
    assert main(["speculative", "r-failed", "-i", INVENTORY]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err == "bwtune: speculative: base run r-failed: no ok config to build on (nothing measured)"


def test_a_base_run_without_its_matrix(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store("r-imported")
    assert main(["speculative", "r-imported", "-i", INVENTORY]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err.startswith("bwtune: speculative: base run r-imported: no matrix kept for it (")
    assert not (home / "runs").exists() or not any(p.name != "r-imported" for p in (home / "runs").iterdir())
