# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Where a launch's start-up time went: the results line's `cold_start`, phase by phase."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_contract import (
    COLD_START_PHASES,
)


@dataclass
class ColdStart:
    """Where a launch's start-up time went, on the monotonic clock from the process's start:
    the results line's `cold_start` (results_contract.COLD_START_SECONDS says what each
    phase means). Each phase keeps its first time; the health poll's interval bounds how
    late the listening and health phases can be seen."""

    started: float = field(default_factory=time.monotonic)
    listening: float | None = None
    health: float | None = None
    ready: float | None = None
    first_token: float | None = None
    failed: float | None = None

    def mark(self, phase: str, at: float | None = None) -> None:
        """Record that `phase` was reached (now, or at monotonic time `at`); the first time stays.

        A later phase implies the earlier ones (a server seen healthy at once was listening)."""
        if phase not in COLD_START_PHASES[1:]:
            raise ValueError("unknown cold-start phase %r" % phase)
        at = time.monotonic() if at is None else at
        for earlier in COLD_START_PHASES[1 : COLD_START_PHASES.index(phase) + 1]:
            if getattr(self, earlier) is None:
                setattr(self, earlier, at)

    def mark_failed(self) -> None:
        if self.failed is None:
            self.failed = time.monotonic()

    def reached(self) -> str:
        return next(
            (phase for phase in reversed(COLD_START_PHASES[1:]) if getattr(self, phase) is not None),
            COLD_START_PHASES[0],
        )

    def as_dict(self) -> dict[str, Any]:
        """The results line's `cold_start`: seconds since the start (ms), null where not reached."""

        def since(at: float | None) -> float | None:
            return None if at is None else round(max(0.0, at - self.started), 3)

        return {
            "process_to_listen_s": since(self.listening),
            "to_health_s": since(self.health),
            "to_ready_s": since(self.ready),
            "to_first_token_s": since(self.first_token),
            "failed_after_s": since(self.failed),
            "reached": self.reached(),
        }
