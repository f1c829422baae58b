"""The results database's former home, kept as a re-export of `bwtune.store` for callers
outside src/ (tests, tests/hosts' scripts, scripts of users): new code imports bwtune.store."""

from __future__ import annotations

from bwtune.store import *  # noqa: F403
