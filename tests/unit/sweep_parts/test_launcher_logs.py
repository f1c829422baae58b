"""A server's log on the node (issue 21 #12): every secret masked before it reaches the disk,
also when the sweep that started the server is killed; the log 0600 in 0700 folders; the
server's exit code or signal is what the sweep sees."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._server import launcher

KEY = "sk-test-api-key-0123456789"
TOKEN = "hf_TestTokenAbcdefghijklmnop"


def masker() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "masker"}
    exec(compile(launcher.MASKER_SOURCE, "masker", "exec"), namespace)
    return namespace


def pumped(data: bytes, secrets: list[bytes], chunk: int) -> bytes:
    """What the masking writer makes of `data` read `chunk` bytes at a time."""
    read_end, write_end = os.pipe()
    out_read, out_write = os.pipe()
    os.write(write_end, data)  # small enough for the pipe's buffer
    os.close(write_end)
    masker()["pump"](read_end, out_write, secrets, chunk=chunk)
    os.close(read_end)
    os.close(out_write)
    with os.fdopen(out_read, "rb") as out:
        return out.read()


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_a_secret_cut_across_reads_is_still_masked(chunk: int) -> None:
    data = (
        f"server_args=ServerArgs(model_path='/m', api_key='{KEY}', port=1)\n"
        f"token {TOKEN}{TOKEN} and {KEY[:5]} is no secret\n"
        f"a long line without its newline {'x' * 200}{KEY}{'y' * 50}"
    ).encode()
    out = pumped(data, [KEY.encode(), TOKEN.encode()], chunk)
    assert out == data.replace(KEY.encode(), b"********").replace(TOKEN.encode(), b"********")


def test_a_secret_holding_a_newline_is_masked_too() -> None:
    secret = b"two\nlines"
    assert pumped(b"a two\nlines b\n", [secret], 2) == b"a ******** b\n"


PRINTS_ITS_ARGS = textwrap.dedent(
    """
    import os, sys
    print("server_args=ServerArgs(%r)" % sys.argv[1:], flush=True)
    print("env HF_TOKEN=" + os.environ["HF_TOKEN"], flush=True)
    sys.exit(int(os.environ.get("EXIT", "0")))
    """
)


def test_the_log_is_masked_private_and_the_exit_code_is_the_servers(tmp_path: Path) -> None:
    log = tmp_path / "run" / "logs" / "c1.log"
    handle = launcher.start_server(
        [sys.executable, "-c", PRINTS_ITS_ARGS, "--api-key", KEY],
        port=1,
        log_path=str(log),
        env={"HF_TOKEN": TOKEN, "EXIT": "3"},
        secrets=[KEY, TOKEN],
    )
    assert handle.proc is not None and handle.proc.wait(30) == 3
    text = log.read_text()
    assert "server_args=ServerArgs(['--api-key', '********'])" in text
    assert "env HF_TOKEN=********" in text
    assert KEY not in text and TOKEN not in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    for folder in (log.parent, log.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_a_server_killed_by_a_signal_reads_as_killed(tmp_path: Path) -> None:
    handle = launcher.start_server(
        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
        port=1,
        log_path=str(tmp_path / "k.log"),
    )
    assert handle.proc is not None and handle.proc.wait(30) == -signal.SIGKILL


def test_a_command_that_does_not_exist_is_an_oserror_as_before(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        launcher.start_server(["/nonexistent/python"], port=1, log_path=str(tmp_path / "n.log"))


# The sweep's side: starts a server that prints the key once told to, says the server's group,
# and dies by SIGKILL at once (the sweep killed while its server runs).
KILLED_SWEEP = textwrap.dedent(
    """
    import os, signal, sys
    from ansible_collections.bwtune.sglang.plugins.module_utils._server import launcher

    go, log, key = sys.argv[1:4]
    server = (
        "import os, sys, time\\n"
        "while not os.path.exists(%r): time.sleep(0.01)\\n"
        "print('api_key=' + sys.argv[1], flush=True)\\n" % go
    )
    handle = launcher.start_server([sys.executable, "-c", server, key], port=1, log_path=log, secrets=[key])
    print(handle.pgid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_killed_sweep_leaves_no_secret_on_disk_and_its_servers_log_goes_on(tmp_path: Path) -> None:
    go, log = tmp_path / "go", tmp_path / "logs" / "s.log"
    sweep = subprocess.run(
        [sys.executable, "-c", KILLED_SWEEP, str(go), str(log), KEY],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert sweep.returncode == -signal.SIGKILL, sweep.stderr
    pgid = int(sweep.stdout.split()[0])
    try:
        go.touch()  # the server prints the key only now, with its sweep dead
        deadline = time.monotonic() + 30
        while launcher.group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert launcher.group_members(pgid) == set(), "the server should end on its own"
    finally:
        for pid in launcher.group_members(pgid):
            os.kill(pid, signal.SIGKILL)
    assert log.read_text() == "api_key=********\n"
