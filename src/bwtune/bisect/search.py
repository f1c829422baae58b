"""One component's search over its ordered versions, like `git bisect`.

Index 0 is known good and the last index known bad. `next` names the version to measure:
the midpoint of the open range, or, when that one is untestable (`skip`), its nearest
untested neighbour (the lower one first on a tie), as `git bisect skip` moves to a nearby
commit. A version is never handed out twice. When nothing is left to measure, `result`
gives the first bad version, or the versions it could be when skipped ones sit between the
last good and the first bad (git bisect's "the first bad commit could be any of").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

GOOD, BAD, SKIP = "good", "bad", "skip"


@dataclass(frozen=True)
class SearchResult:
    last_good: int
    first_bad: int | None  # None: a skipped version between the two could be it
    could_be: tuple[int, ...]  # the indices the first bad version is among (itself when known)


class ComponentSearch:
    def __init__(self, size: int) -> None:
        if size < 2:
            raise ValueError(f"a search needs its good and bad ends: {size} version(s)")
        self.good, self.bad = 0, size - 1
        self.skipped: set[int] = set()
        self.marked: dict[int, str] = {0: GOOD, size - 1: BAD}

    def open_indices(self) -> Sequence[int]:
        return [i for i in range(self.good + 1, self.bad) if i not in self.skipped and i not in self.marked]

    def next(self) -> int | None:
        """The version to measure next; None when the search is over."""
        todo = self.open_indices()
        if not todo:
            return None
        middle = (self.good + self.bad) // 2
        return min(todo, key=lambda i: (abs(i - middle), i))

    def mark(self, index: int, verdict: str) -> None:
        if index in self.marked or index in self.skipped:
            raise ValueError(f"version {index} is already {self.marked.get(index, SKIP)}")
        if not self.good < index < self.bad:
            raise ValueError(f"version {index} is outside the open range {self.good}..{self.bad}")
        if verdict == SKIP:
            self.skipped.add(index)
            return
        if verdict not in (GOOD, BAD):
            raise ValueError(f"verdict {verdict!r}: good, bad or skip")
        self.marked[index] = verdict
        if verdict == GOOD:
            self.good = index
        else:
            self.bad = index

    def result(self) -> SearchResult:
        could_be = tuple(range(self.good + 1, self.bad + 1))
        return SearchResult(self.good, self.bad if len(could_be) == 1 else None, could_be)
