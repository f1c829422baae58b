"""A real PostgreSQL server for the store's tests: initdb + pg_ctl on a temporary folder and
a free loopback port, stopped (and its folder removed) when the last test that uses it is
done, or at exit. initdb refuses to run as root: as root the server runs as the system
user `postgres` (runuser). scripts/postgres/ensure-postgres.sh finds initdb/pg_ctl or, as
root, installs Debian's package. Each test gets a database of its own (`fresh_database`).

The conftests of tests/unit/store, tests/unit/db and tests/integration/store import the
`postgres_server` fixture from here; the server is one per pytest process whichever asks.
"""

from __future__ import annotations

import atexit
import itertools
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ENSURE = ROOT / "scripts" / "postgres" / "ensure-postgres.sh"
SYSTEM_USER = "postgres"
PASSWORD = "s3cret-Pg-pw"  # the test role's; tests check it never shows in output


class PostgresServer:
    def __init__(self, bindir: Path, folder: Path, port: int, user: str | None) -> None:
        self.bindir = bindir
        self.folder = folder
        self.port = port
        self.run_as = user  # None: as this process's user
        self.data = folder / "data"
        self._names = itertools.count(1)
        self.started = False

    def _cmd(self, *words: str) -> list[str]:
        return ["runuser", "-u", self.run_as, "--", *words] if self.run_as else list(words)

    def start(self) -> None:
        pwfile = self.folder / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if self.run_as:
            entry = pwd.getpwnam(self.run_as)
            for path in (self.folder, pwfile):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        locale = "--locale=C.UTF-8" if _has_c_utf8() else "--locale=C"
        initdb = [str(self.bindir / "initdb"), "-D", str(self.data), "-U", "bwtune", "--auth=scram-sha-256",
                  f"--pwfile={pwfile}", "-E", "UTF8", locale]  # fmt: skip
        subprocess.run(self._cmd(*initdb), check=True, capture_output=True, text=True)
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder}"
        options += " -c fsync=off -c max_connections=40"
        subprocess.run(
            self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "log"),
                      "-o", options, "-w", "-t", "60", "start"),
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        self.started = True
        # Should this pytest process die without its teardown (SIGKILL), a watcher in a
        # session of its own stops the server within a second or two: none outlives the tests.
        stop = " ".join(shlex.quote(w) for w in self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.data),
                                                         "-m", "immediate", "-w", "stop"))  # fmt: skip
        watch = (f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; "
                 f"{stop} >/dev/null 2>&1; rm -rf {shlex.quote(str(self.folder))}")  # fmt: skip
        self._watcher = subprocess.Popen(
            ["sh", "-c", watch], start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def stop(self) -> None:
        watcher = getattr(self, "_watcher", None)
        if watcher is not None:
            watcher.kill()
            watcher.wait()
            self._watcher = None
        if self.started:
            subprocess.run(
                self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"),
                capture_output=True, check=False,
            )  # fmt: skip
            self.started = False
        shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str = "postgres", *, password: bool = True) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://bwtune{secret}@127.0.0.1:{self.port}/{database}"

    def fresh_database(self) -> str:
        """A new empty store's URL (with the password): a schema of its own, named by the
        URL's search_path (CREATE DATABASE takes a second; a schema, milliseconds)."""
        import psycopg

        name = f"store_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return self.url() + f"?options=-csearch_path%3D{name}"


def _has_c_utf8() -> bool:
    out = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False).stdout.lower()
    return "c.utf8" in out or "c.utf-8" in out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_SERVER: PostgresServer | None = None
_SKIP: str | None = None
_USERS = 0


def _start() -> PostgresServer:
    global _SERVER, _SKIP
    if _SERVER is not None:
        return _SERVER
    if _SKIP is not None:
        pytest.skip(_SKIP)
    # psycopg is a dependency of bwtune: its absence is a broken install, not a reason to skip.
    import psycopg  # noqa: F401

    found = subprocess.run(["bash", str(ENSURE)], capture_output=True, text=True, check=False)
    if found.returncode != 0:
        why = f"no PostgreSQL server to test against: {found.stderr.strip()}"
        if os.geteuid() == 0:  # root (CI) can install it: not having it is a failure
            pytest.fail(why)
        _SKIP = why
        pytest.skip(_SKIP)
    bindir = Path(found.stdout.strip().splitlines()[-1])
    user = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            pytest.fail(f"running as root and there is no system user {SYSTEM_USER!r} to run initdb as")
        if shutil.which("runuser") is None:
            pytest.fail("running as root and runuser is missing: initdb refuses to run as root")
        user = SYSTEM_USER
    folder = Path(tempfile.mkdtemp(prefix="bwtune-pg-"))
    os.chmod(folder, 0o700)
    server = PostgresServer(bindir, folder, _free_port(), user)
    try:
        server.start()
    except subprocess.CalledProcessError as err:
        server.stop()
        raise RuntimeError(
            f"could not start PostgreSQL: {err.cmd[-1]}: {(err.stderr or '').strip()}"
        ) from None
    _SERVER = server
    atexit.register(_stop)
    return server


def _stop() -> None:
    global _SERVER
    if _SERVER is not None:
        _SERVER.stop()
        _SERVER = None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The process's PostgreSQL server, started on first use, stopped after the session."""
    global _USERS
    server = _start()
    _USERS += 1
    try:
        yield server
    finally:
        _USERS -= 1
        if _USERS == 0:
            _stop()
