# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""How a sweep stops early: the errors that end it, and a node write whose failure is one."""

from __future__ import annotations

from typing import Any


class SweepFailed(RuntimeError):
    """The sweep itself could not go on (e.g. a server that would not stop)."""

    def __init__(self, message: str, partial: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.partial = partial or {}


class Cancelled(Exception):
    """SIGTERM: stop the server in flight, keep every result so far, and exit."""


def writing(path: str, write: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a write on the node; an OSError becomes a SweepFailed naming the path."""
    try:
        return write(*args, **kwargs)
    except OSError as exc:
        raise SweepFailed("cannot write %s: %s" % (path, exc.strerror or exc)) from None


def raise_cancelled(signum: int, frame: Any) -> None:
    raise Cancelled()
