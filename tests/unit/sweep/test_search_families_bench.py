"""benchmarks/search_cost.py --families: one family and one strategy at a time (the grid is
always run: the share is of its GPU-hours), and a bad --landscapes is one clear error."""

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


def test_one_family_and_one_strategy(search_cost: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--families", "tuning", "--family", "plateau-peak", "--strategy", "adaptive", "--landscapes", "2"]
    assert search_cost.main(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| plateau-peak")]
    assert [row.split("|")[2].strip() for row in rows] == ["grid", "adaptive"]
    assert all("(2)" in row for row in rows)


def test_the_generator_kinds_alone(search_cost: ModuleType) -> None:
    rows = search_cost.families("tuning", ("grid", "adaptive"), count=1, only=(search_cost.GENERATOR,))
    assert {r["family"] for r in rows} == {search_cost.GENERATOR}
    assert all(r["launches_max"] <= r["announced"] for r in rows)


def test_no_landscapes_is_refused(search_cost: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        search_cost.main(["--families", "tuning", "--landscapes", "0"])
    assert exit_info.value.code != 0
    assert "--landscapes must be at least 1" in capsys.readouterr().err
