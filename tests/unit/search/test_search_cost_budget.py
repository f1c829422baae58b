"""benchmarks/search_cost.py --budget: adaptive with another launch budget as a row of its own
on the stress families (issue 24: how far found moves with the configs launched), and a
budget outside (0, 1] or without --families/--wide is one clear error."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="module")
def search_cost() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import search_cost

        yield search_cost
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_a_budget_variant_is_a_row_of_its_own(search_cost: ModuleType) -> None:
    """On a flat top the default stops at its budget: the whole budget launches more, and
    keeps the budget it announces."""
    name = search_cost.budget_variant(1.0)
    rows = search_cost.families("tuning", ("grid", "adaptive", name), count=2, only=("plateau-peak",))
    by_name = {r["strategy"]: r for r in rows}
    assert set(by_name) == {"grid", "adaptive", name}
    assert by_name[name]["launches_max"] > by_name["adaptive"]["launches_max"]
    assert all(r["over_announced"] == 0 for r in rows)


def test_the_budget_row_is_printed(search_cost: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--families", "tuning", "--family", "combination", "--strategy", "adaptive"]
    assert search_cost.main([*argv, "--budget", "0.5", "--landscapes", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| combination")]
    assert [row.split("|")[2].strip() for row in rows] == ["grid", "adaptive", "adaptive, budget 0.5"]


@pytest.mark.parametrize("share", ["0", "1.5", "-0.2"])
def test_a_budget_outside_0_1_is_refused(
    search_cost: ModuleType, capsys: pytest.CaptureFixture[str], share: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        search_cost.main(["--families", "tuning", "--budget", share])
    assert exit_info.value.code != 0
    assert f"--budget {float(share):g}: a share of the valid configs" in capsys.readouterr().err


def test_a_budget_without_families_is_refused(
    search_cost: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        search_cost.main(["--budget", "0.5"])
    assert exit_info.value.code != 0
    assert "--budget needs --families or --wide" in capsys.readouterr().err
