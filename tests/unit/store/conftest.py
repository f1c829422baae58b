from __future__ import annotations

from tests.unit.store.postgres_server import postgres_server

__all__ = ["postgres_server"]  # the fixture: a real PostgreSQL server for this folder's tests
