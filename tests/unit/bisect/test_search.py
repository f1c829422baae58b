"""One component's search, like git bisect: the midpoint, a skipped version's neighbour,
never a version twice, and the range left when skipped versions hide the first bad one."""

from __future__ import annotations

import math

import pytest

from bwtune.bisect.search import BAD, GOOD, SKIP, ComponentSearch


def run(
    size: int, first_bad: int, untestable: frozenset[int] = frozenset()
) -> tuple[ComponentSearch, list[int]]:
    search = ComponentSearch(size)
    asked = []
    while (index := search.next()) is not None:
        asked.append(index)
        search.mark(index, SKIP if index in untestable else BAD if index >= first_bad else GOOD)
    return search, asked


@pytest.mark.parametrize("first_bad", range(1, 64))
def test_finds_every_position_in_log2_steps(first_bad: int) -> None:
    search, asked = run(64, first_bad)
    assert search.result().first_bad == first_bad
    assert len(asked) <= math.ceil(math.log2(63))
    assert len(asked) == len(set(asked))


def test_a_skipped_midpoint_moves_to_its_nearest_neighbour() -> None:
    search = ComponentSearch(65)
    assert search.next() == 32
    search.mark(32, SKIP)
    assert search.next() == 31  # the lower neighbour on a tie
    search.mark(31, SKIP)
    assert search.next() == 33


def test_skipped_versions_next_to_the_change_leave_a_range() -> None:
    search, asked = run(16, first_bad=9, untestable=frozenset({8, 9}))
    result = search.result()
    assert result.first_bad is None
    assert result.could_be == (8, 9, 10)
    assert result.last_good == 7
    assert not {8, 9} - set(asked)  # each tried once
    assert len(asked) == len(set(asked))


def test_a_version_is_never_marked_twice() -> None:
    search = ComponentSearch(8)
    index = search.next()
    assert index is not None
    search.mark(index, GOOD)
    with pytest.raises(ValueError, match="already good"):
        search.mark(index, BAD)


def test_two_versions_need_no_step() -> None:
    search = ComponentSearch(2)
    assert search.next() is None
    assert search.result().first_bad == 1
