"""unit_health.wait_serving with a scripted unit: healthy, exited, crash-looping, never ready."""

from __future__ import annotations

from collections.abc import Iterator

from ansible_collections.bwtune.sglang.plugins.module_utils._serving import unit_health as sh

OOM_LOG = [
    "Load weight end. type=Qwen3_5MoeForConditionalGeneration (simulated)",
    "torch.OutOfMemoryError: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB",
    "bwtune-sglang.service: Main process exited, code=exited, status=1/FAILURE",
]


def states(*items: dict[str, str]) -> Iterator[dict[str, str]]:
    yield from items
    while True:
        yield items[-1]


def wait(state_seq: Iterator[dict[str, str]], health: list[int], timeout_s: float = 5.0) -> dict:
    codes = iter(health)
    return sh.wait_serving(
        "u.service",
        "127.0.0.1",
        1,
        timeout_s=timeout_s,
        poll_s=0.0,
        state_of=lambda unit: next(state_seq),
        journal_of=lambda unit, n: OOM_LOG[-n:],
        status_of=lambda host, port, path, timeout: next(codes, 503),
    )


RUNNING = {"ActiveState": "active", "SubState": "running", "NRestarts": "0"}


def test_healthy_once_health_generate_answers_200() -> None:
    got = wait(states(RUNNING), [503, 503, 200])
    assert got["healthy"] and got["failure"] is None


def test_exited_unit_is_classified_from_its_journal() -> None:
    failed = {"ActiveState": "failed", "SubState": "failed", "ExecMainStatus": "1", "NRestarts": "0"}
    got = wait(states(RUNNING, failed), [503])
    assert not got["healthy"]
    assert got["failure"]["class"] == "oom"
    assert got["failure"]["log_tail"] == OOM_LOG


def test_crash_loop_seen_only_through_the_restart_counter() -> None:
    # Every poll finds a running attempt; only NRestarts shows the one before crashed.
    again = {**RUNNING, "NRestarts": "1"}
    got = wait(states(RUNNING, again), [503])
    assert got["failure"]["class"] == "oom"


def test_never_ready_is_a_startup_timeout() -> None:
    got = wait(states(RUNNING), [], timeout_s=0.05)
    assert got["failure"]["class"] == "oom"  # the journal says why, even at the deadline
    quiet = sh.wait_serving(
        "u.service", "127.0.0.1", 1, timeout_s=0.05, poll_s=0.0,
        state_of=lambda unit: RUNNING, journal_of=lambda unit, n: ["Capture cuda graph begin."],
        status_of=lambda host, port, path, timeout: 503,
    )  # fmt: skip
    assert quiet["failure"]["class"] == "startup-timeout"
    assert quiet["failure"]["message"].startswith("not healthy after 0.05 s")


def test_env_file_value(tmp_path) -> None:
    env = tmp_path / "api-key.env"
    env.write_text("OTHER=1\nBWTUNE_SERVER_API_KEY=abc=def\n")
    assert sh.read_env_value(str(env), "BWTUNE_SERVER_API_KEY") == "abc=def"
    assert sh.read_env_value(str(tmp_path / "none"), "X") is None
