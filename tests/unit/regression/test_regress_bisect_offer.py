"""`bwtune regress` offers `bwtune bisect GOOD BAD --config ID` for a regression that came with
a stack change it can bisect (issue 28), and not for one without, nor for a driver change."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from history_lines import STACK, stack, store_run

from bwtune import exit_codes, results_db
from bwtune.cli import main
from bwtune.commands import regress

INVENTORY = Path(__file__).parents[3] / "inventory" / "local.yml"
MATRIX = Path(__file__).parents[3] / "examples" / "demo.yml"
OFFER = re.compile(
    r"^to find the component version that cost it .*: (bwtune bisect \S+ \S+ --config \S+)$", re.M
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BWTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BWTUNE_DB", raising=False)
    conn = results_db.connect(tmp_path / "home" / "results.db")
    store_run(conn, "night-1", 1, {"cprod000001": 1000.0}, launches=6, seed=1)
    conn.close()
    return tmp_path / "home"


def _regress(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], home: Path, level: float,
    components: dict[str, Any],
) -> tuple[int, str, list[str]]:  # fmt: skip
    made: list[str] = []

    def measured(request: Any, repetitions: int, *, quiet: bool = False, estimate: Any = None) -> None:
        made.append(request.run_id)
        conn = results_db.connect(home / "results.db")
        try:
            store_run(conn, request.run_id, 9, {"cprod000001": level}, launches=6, seed=9, tag=False,
                      stack_components=components)  # fmt: skip
        finally:
            conn.close()

    monkeypatch.setattr(regress, "measure", measured)
    code = main(["regress", "-i", str(INVENTORY), "-m", str(MATRIX), "--repetitions", "2", "--quiet"])
    return code, capsys.readouterr().out, made


def test_a_regression_with_a_stack_change_offers_the_bisect_command(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, made = _regress(monkeypatch, capsys, home, 850.0, stack(sglang_commit="9f8e7d6"))
    assert code == exit_codes.REGRESSION
    assert OFFER.findall(out) == [f"bwtune bisect night-1 {made[0]} --config cprod000001"]
    # The command it prints runs, and plans the bisection of the component that changed.
    assert main(OFFER.findall(out)[0].split()[1:]) == exit_codes.OK
    planned = capsys.readouterr().out
    assert "  SGLang commit: 0a1b2c3 -> 9f8e7d6: 2 candidates" in planned


@pytest.mark.parametrize(
    ("level", "components"),
    [
        (850.0, STACK),  # slower on the same stack: nothing to bisect
        (1000.0, stack(sglang_commit="9f8e7d6")),  # a stack change, no regression
        (850.0, stack(driver="590.10")),  # the host's driver: a bisection builds no driver
    ],
)
def test_no_offer_without_a_bisectable_stack_change(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], level: float,
    components: dict[str, Any],
) -> None:  # fmt: skip
    code, out, _made = _regress(monkeypatch, capsys, home, level, components)
    assert code == (exit_codes.REGRESSION if level < 1000 else exit_codes.OK)
    assert "bwtune bisect" not in out
    assert "# bwtune regression run" in out  # the summary itself was printed
