"""The node sweep's port race and logs (issue 20 #3): a server whose bind error is followed by
a long shutdown (SGLang's warmup thread waits, then logs its traceback) lost its port and is
started again on the next free one, not recorded as crashed; every start of a config keeps
its own log (a crash's log survives the retry, a forced repetition and a resume)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from ansible_collections.bwtune.sglang.plugins.module_utils._server import launcher
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner

from .conftest import Node, read_lines
from .test_reliability_node import on_node, options, run  # noqa: F401  (on_node: a fixture)

# Loses its port the first time (uvicorn's bind error, then 80 lines of shutdown traceback,
# exit 1); the stand-in from then on.
LOSES_ITS_PORT_ONCE = textwrap.dedent(
    """
    import os, sys
    marker, argv = sys.argv[1], sys.argv[2:]
    if not os.path.exists(marker):
        open(marker, "w").close()
        port = argv[argv.index("--port") + 1]
        print("ERROR:    [Errno 98] error while attempting to bind on address "
              "('127.0.0.1', %s): address already in use" % port, flush=True)
        print("Initialization failed. warmup error: Traceback (most recent call last):")
        for n in range(80):
            print('  File "requests/adapters.py", line %d, in send' % n)
        print("requests.exceptions.ConnectionError: connection refused", flush=True)
        sys.exit(1)
    os.execv(sys.executable, [sys.executable, "-m", "bwtune.standin", *argv])
    """
)


def _logs(node: Node, run_id: str) -> list[Path]:
    return sorted((node.results_path(run_id).parent / "logs").glob("*.log"))


def test_a_bind_error_before_a_long_shutdown_is_a_lost_port_started_again(
    on_node: Node,  # noqa: F811
) -> None:
    node = on_node
    script = node.root / "loses_its_port_once.py"
    script.write_text(LOSES_ITS_PORT_ONCE)
    launch = [sys.executable, str(script), str(node.root / "lost-once")]
    outcome = run(options(node, "long-race", ["ok-base"], launch_command=launch))
    lines = read_lines(node.results_path("long-race"))
    assert [line["status"] for line in lines] == ["ok"], lines[0].get("failure")
    assert outcome["summary"]["launches"] == 1
    # Both starts kept their log: the lost one with its bind error, the one that measured.
    first, second = _logs(node, "long-race")
    config_id = lines[0]["config_id"]
    assert (first.name, second.name) == (f"{config_id}.2.log", f"{config_id}.log")
    assert "address already in use" in second.read_text()
    assert "address already in use" not in first.read_text()
    node.assert_nothing_left()


def test_a_forced_repetition_keeps_the_earlier_launchs_log(on_node: Node) -> None:  # noqa: F811
    node = on_node
    opts = options(node, "reps", ["ok-base"])
    first = sweep_runner.Sweep(opts, sweep_runner.make_plan(opts))
    first.run()
    # A node runs one sweep per process: its locks go with the process; here, closed.
    os.close(first._lock)
    os.close(first._node_lock)
    run(options(node, "reps", ["ok-base"], force=True))
    logs = _logs(node, "reps")
    assert len(logs) == 2 and all(log.read_text() for log in logs)
    node.assert_nothing_left()


def test_lost_port_reads_past_the_last_lines_and_only_for_its_own_port(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    bind = "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): "
    log.write_text(bind + "address already in use\n" + "  traceback line\n" * 120)
    assert launcher.lost_port(str(log), 30000)
    assert not launcher.lost_port(str(log), 30001)  # another port's bind error is no lost race
