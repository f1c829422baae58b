# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A server log only its owner reads, written by a writer process that masks every secret as it streams."""

from __future__ import annotations

import contextlib
import os


def private_dirs(path: str) -> None:
    """Make `path` a folder only its owner can enter: each missing folder up to it is made 0700,
    and `path` itself becomes 0700 when it exists with more (the async wrapper's umask 022
    makes 0755). A server's log may hold what it prints about its configuration."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
    leaf = missing[0] if missing else path
    if os.stat(leaf).st_mode & 0o077:
        with contextlib.suppress(PermissionError):  # not ours: what is written in it says so
            os.chmod(leaf, 0o700)


# The masking writer: the leader of a server's session, it starts the server as its child and
# copies the server's output into the log as it comes, every secret masked on the way. A
# process of its own, in the server's process group, so it lives exactly as long as the server:
# a killed sweep leaves a server whose log still fills, masked (found and stopped like any
# leftover); stopping the group ends both. It exits as the server did (code or signal).
# Secrets come through a pipe, never argv or the environment. Standard library only.
MASKER_SOURCE = r"""
import json, os, select, signal, sys, time

MASK = b"********"
CHUNK = 65536


def mask(data, secrets):
    for secret in secrets:  # longest first: one secret may hold another
        data = data.replace(secret, MASK)
    return data


def safe_cut(data, secrets, cut):
    # `cut`, moved past every secret in `data` that starts before it and ends after it.
    moved = True
    while moved:
        moved = False
        for secret in secrets:
            at = data.find(secret, max(0, cut - len(secret) + 1))
            while at != -1 and at < cut:
                if at + len(secret) > cut:
                    cut, moved = at + len(secret), True
                at = data.find(secret, at + 1)
    return cut


def pump(source, log_fd, secrets, ended=lambda: False, chunk=CHUNK):
    # Whole lines go out at once (when no secret holds a newline); of a long line, all but
    # what a secret starting there may go on from in the next read. A failed write (a full
    # disk) stops the writing, never the reading: the server never blocks on its output.
    secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
    keep = max((len(s) for s in secrets), default=1) - 1
    by_line = not any(b"\n" in s for s in secrets)
    pending, writable = b"", [True]

    def write(data):
        view = memoryview(mask(data, secrets))
        while view and writable[0]:
            try:
                view = view[os.write(log_fd, view):]
            except OSError:
                writable[0] = False

    while True:
        # Until the output ends, or the server has ended and a child of it still holds the pipe.
        if not select.select([source], [], [], 0.25)[0]:
            if ended():
                break
            continue
        data = os.read(source, chunk)
        if not data:
            break
        pending += data
        cut = pending.rfind(b"\n") + 1 if by_line else 0
        if not cut and len(pending) > (chunk if by_line else 0) + keep:
            cut = safe_cut(pending, secrets, len(pending) - keep)
        if cut:
            write(pending[:cut])
            pending = pending[cut:]
    if pending:
        write(pending)


def main():
    secrets_fd, log_fd, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    with os.fdopen(secrets_fd, "rb") as src:
        secrets = [s.encode() for s in json.load(src)]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # as subprocess does: Python ignores them
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        for fd in (read_end, write_end, log_fd):
            os.close(fd)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, ("cannot start %s: %s\n" % (argv[0], exc)).encode())
        os._exit(127)
    os.close(write_end)
    # The group's SIGTERM is for the server: this one goes on until the server's output ends.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    reaped = {}

    def ended():
        if "status" not in reaped:
            done, status = os.waitpid(pid, os.WNOHANG)
            if not done:
                return False
            reaped.update(status=status, at=time.monotonic())
        return time.monotonic() - reaped["at"] > 2.0

    pump(read_end, log_fd, secrets, ended)
    os.close(log_fd)
    if "status" not in reaped:
        reaped["status"] = os.waitpid(pid, 0)[1]
    status = reaped["status"]
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)  # SIGKILL and SIGSTOP have no handler to reset
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()
"""
