"""A simulated world for the bisection engine's tests: each stack has a throughput level,
each launch its own seeded noise (launch to launch, then repetition to repetition), so a
measurement is the same whenever it is taken (deterministic seeds from the stack and the
launch's number) and a resumed run sees what an uninterrupted one saw."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from bwtune.bisect.bisection import Measured, Untestable
from bwtune.bisect.log import stack_key

GOOD = {
    "fingerprint": "f-good",
    "torch": "2.12.0.dev20260301+cu130",
    "cuda": "13.0",
    "sglang": "0.5.23",
    "sglang_commit": "c00",
    "sgl_kernel": "0.3.21",
    "sgl_kernel_build": "sm_120a; fp4 ops: scaled_fp4_quant",
    "flashinfer": "0.6.1",
    "driver": "580.95.05",
}
COMMITS = [f"c{i:02d}" for i in range(64)]  # first-parent order, oldest (the good one) first
NIGHTLIES = [f"2.12.0.dev202603{day:02d}+cu130" for day in range(1, 9)]
FLASHINFER = ["0.6.1", "0.6.2", "0.6.3", "0.7.0"]


def stack(**changes: str) -> dict[str, str]:
    return {**GOOD, "fingerprint": "f-" + "-".join(sorted(changes.values())), **changes}


class Kill(Exception):
    """The bisection killed mid-run."""


class World:
    def __init__(
        self,
        level: Callable[[Mapping[str, Any]], float],
        *,
        noise: float = 0.02,
        repetitions: int = 3,
        noise_of: Callable[[Mapping[str, Any]], float] | None = None,
        spread_of: Callable[[Mapping[str, Any]], float] = lambda stack: 0.0,
        broken: Callable[[Mapping[str, Any]], str | None] = lambda stack: None,
        kill_at: int | None = None,
    ) -> None:
        self.level, self.noise, self.repetitions = level, noise, repetitions
        self.noise_of = noise_of or (lambda stack: noise)
        self.broken = broken
        # A stack whose launches spread by a fixed pattern (0, +d, -d, ...): noisy, and the
        # same noise at every seed, so a test can rely on how many launches it takes.
        self.spread_of = spread_of
        self.kill_at = kill_at  # the call of measure that "kills" the bisection (1-based)
        self.launched: Counter[str] = Counter()  # launches taken per stack
        self.taken: list[tuple[str, int]] = []  # (stack, launch number) of every launch
        self.calls: list[tuple[str, int]] = []  # (stack, launches asked) of every call
        self.tried: Counter[str] = Counter()  # calls per untestable stack

    def measure(self, stack: Mapping[str, Any], count: int) -> Measured | Untestable:
        self.calls.append((stack_key(stack), count))
        if self.kill_at is not None and len(self.calls) >= self.kill_at:
            self.kill_at = None
            raise Kill()
        key = stack_key(stack)
        why = self.broken(stack)
        if why:
            self.tried[key] += 1
            return Untestable("build", why)
        launches = []
        for number in range(self.launched[key], self.launched[key] + count):
            rng = random.Random(f"{key}|{number}")
            spread = self.spread_of(stack)
            deviation = (0.0, spread, -spread)[number % 3] if spread else rng.gauss(0, self.noise_of(stack))
            mean = self.level(stack) * (1 + deviation)
            launches.append([mean * (1 + rng.gauss(0, 0.005)) for _ in range(self.repetitions)])
            self.taken.append((key, number))
        self.launched[key] += count
        return Measured(launches)


def commit_change(at: int, slow: float = 0.8) -> Callable[[Mapping[str, Any]], float]:
    """100 tok/s, `slow` times that from commit `at` on."""

    def level(stack: Mapping[str, Any]) -> float:
        commit = stack["sglang_commit"]
        return 100.0 * (slow if commit in COMMITS and COMMITS.index(commit) >= at else 1.0)

    return level
