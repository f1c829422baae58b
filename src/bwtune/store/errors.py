"""The results store's errors: each is one line a command prints as it is."""

from __future__ import annotations

import sqlite3


class UnknownRunError(LookupError):
    """No run with that id in the database."""


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer bwtune."""


class MissingDatabaseError(LookupError):
    """A reading command named a results database that does not exist (it never creates one)."""


class StorageError(RuntimeError):
    """BWTUNE_HOME or the results database cannot take a run's results; one line says why."""


# Errors a command reports as one line with exit code 2 (bad input).
DB_INPUT_ERRORS = (sqlite3.DatabaseError, OSError, MissingDatabaseError)
