"""Where bwtune keeps its runs and results database ($BWTUNE_HOME, $BWTUNE_DB)."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract


def bwtune_home() -> Path:
    """The runs directory's parent: $BWTUNE_HOME, else ~/.local/share/bwtune."""
    env = os.environ.get("BWTUNE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".local" / "share" / "bwtune"


_URL_SCHEMES = ("postgresql", "postgres")
# What pathlib leaves of a URL (`Path("postgresql://h/db")` is `postgresql:/h/db`).
_URL_PREFIX = re.compile(r"^(postgresql|postgres):/+", re.IGNORECASE)
_KNOWN_URLS: dict[str, str] = {}  # the masked text of each DatabaseURL (as pathlib keeps it) -> the URL


class DatabaseURL(os.PathLike[str]):
    """A results store on a PostgreSQL server (`postgresql://user:password@host:port/db`),
    given where a database path goes (`--db`, $BWTUNE_DB).

    Printed (`str`, an f-string, a log, an error) it never shows its password (`***`);
    `url` is the one place the password is. A command that wraps it in a Path still
    reaches the same server: `database_target` maps the masked text back to the URL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.masked = mask_url(url)
        _KNOWN_URLS[str(Path(self.masked))] = url
        _KNOWN_URLS[self.masked] = url

    def __str__(self) -> str:
        return self.masked

    def __repr__(self) -> str:
        return f"DatabaseURL({self.masked!r})"

    def __fspath__(self) -> str:
        return self.masked

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatabaseURL) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    # What a command asks of a database path; a server's store is no file.
    def exists(self) -> bool:
        return False

    def is_file(self) -> bool:
        return False

    def unlink(self, missing_ok: bool = False) -> None:
        """Nothing to remove: the server keeps the store (a failed import stored nothing)."""

    @property
    def parents(self) -> tuple[Path, ...]:
        return ()


def is_database_url(value: str | os.PathLike[str]) -> bool:
    """Whether a `--db`/$BWTUNE_DB value names a PostgreSQL server rather than a file."""
    return isinstance(value, DatabaseURL) or bool(_URL_PREFIX.match(os.fspath(value)))


def mask_url(url: str) -> str:
    """The URL with its password (if any) shown as `***`; the same text when it has none."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:  # a malformed netloc (a bad port): hide everything between :// and @
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def database_target(value: str | os.PathLike[str] | None) -> Path | DatabaseURL:
    """A `--db`/$BWTUNE_DB value (or None: the default) as a file path or a server's URL."""
    if value is None:
        return default_db_path()
    if isinstance(value, DatabaseURL):
        return value
    text = os.fspath(value)
    if not _URL_PREFIX.match(text):
        return Path(text).expanduser()
    known = _KNOWN_URLS.get(text)
    if known is not None:
        return DatabaseURL(known)
    # A URL pathlib has been through: its `//` became `/`.
    return DatabaseURL(_URL_PREFIX.sub(lambda m: f"{m.group(1)}://", text, count=1))


def default_db_path() -> Path | DatabaseURL:
    """$BWTUNE_DB if set (a file, or a PostgreSQL server's `postgresql://` URL), else
    results.db next to the runs directory."""
    env = os.environ.get("BWTUNE_DB")
    if env and is_database_url(env):
        return DatabaseURL(env)
    return Path(env).expanduser() if env else bwtune_home() / "results.db"


def db_argument(value: str) -> Path | DatabaseURL:
    """`--db`'s type: a file path, or a PostgreSQL server's URL kept whole."""
    return DatabaseURL(value) if is_database_url(value) else Path(value)


def run_dir(run_id: str) -> Path:
    """`$BWTUNE_HOME/runs/<run id>`; ValueError for a run id that is not one path component."""
    return bwtune_home() / "runs" / contract.check_run_id(run_id)


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """The `--db PATH` option every command that reads or writes results shares."""
    parser.add_argument(
        "--db", metavar="PATH", type=db_argument, default=None,
        help="results database: a file, or a PostgreSQL server as postgresql://USER@HOST:PORT/DB "
        "(default: $BWTUNE_DB, else $BWTUNE_HOME/results.db, else ~/.local/share/bwtune/results.db)",
    )  # fmt: skip


def storage_failure_message(
    err: BaseException,
    run_id: str,
    node_results: Mapping[str, str],
    db_path: Path | DatabaseURL | None = None,
) -> str:
    """One line for results that could not be stored at the end of a sweep: where they are
    safe on the nodes and how to import them later."""
    where = ", ".join(f"{host}:{path}" for host, path in sorted(node_results.items())) or "the nodes"
    db = db_path if db_path is not None else default_db_path()
    return (
        f"could not store run {run_id} in the results database {db}: {err}; the results are kept on "
        f"{where}: copy each file here and run `bwtune import FILE --run-id {run_id}`"
    )
