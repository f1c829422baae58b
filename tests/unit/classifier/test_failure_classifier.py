"""Rules of the failure classifier, each on the smallest log that shows it."""

from __future__ import annotations

from ansible_collections.bwtune.sglang.plugins.module_utils.failure_classifier import classify

SITE = "/usr/lib/python3/dist-packages"


def cls(lines: list[str], exited: bool = True, rc: int | None = 1) -> str:
    return classify(lines, exited=exited, returncode=rc).failure_class


def tb(*frames: str, exc: str) -> list[str]:
    out = ["Traceback (most recent call last):"]
    for f in frames:
        out += [f'  File "{SITE}/{f}", line 10, in fn', "    call()"]
    return [*out, exc]


def test_the_frames_decide_where_an_exception_was_raised():
    args = tb("sglang/launch_server.py", "sglang/srt/server_args.py", exc="ValueError: bad combination")
    assert cls(args) == "invalid-args"
    group = tb("sglang/srt/server_args.py", "sglang/srt/arg_groups/speculative.py", exc="AssertionError")
    assert cls(group) == "invalid-args"
    # The same exception type raised while loading the model is a crash, with or without
    # a "Load weight begin" line before it.
    load = tb("sglang/srt/managers/scheduler.py", "sglang/srt/model_loader/loader.py", exc="ValueError: x")
    assert cls(load) == "crashed"
    nccl = tb(
        "sglang/srt/model_executor/model_runner.py", exc="RuntimeError: NCCL error: remote process exited"
    )
    assert cls(nccl) == "crashed"


def test_a_frameless_argument_check_counts_until_the_log_shows_arguments_were_accepted():
    assert cls(["AssertionError: Please set --speculative-num-steps"]) == "invalid-args"
    accepted = ["[2026-01-01] server_args=ServerArgs(model_path='m')", "ValueError: bad shape"]
    assert cls(accepted) == "crashed"
    assert cls(["RuntimeError: something else"]) == "crashed"


def test_argparse_refusals_and_exit_status_2():
    usage = "usage: launch_server.py [-h] --model-path MODEL_PATH"
    err = "launch_server.py: error: argument --tp-size: invalid int value: 'x'"
    failure = classify([usage, err], exited=True, returncode=2)
    assert failure.as_tuple() == ("invalid-args", err)
    assert cls([usage], rc=2) == "invalid-args"
    assert cls(["some output"], rc=2) == "invalid-args"
    assert cls(["Load weight begin.", "some output"], rc=2) == "crashed"


def test_memory_and_hardware_phrases_win_and_advice_is_not_evidence():
    assert cls(tb("sglang/srt/server_args.py", exc="torch.OutOfMemoryError: CUDA out of memory.")) == "oom"
    advice = [
        "Exception: Capture cuda graph failed: an illegal memory access was encountered",
        "Possible solutions:",
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    ]
    assert cls(advice) == "crashed"
    assert cls(["ValueError: The 'fa3' backend is not supported on Blackwell GPUs"]) == "unsupported-hardware"
    assert cls(["NotImplementedError: trtllm-gen MoE kernels are SM100-only"]) == "unsupported-hardware"
    broken = ["ImportError: /x/common_ops.abi3.so: undefined symbol: _ZN3c10", "- Compute capability: 120"]
    assert cls(broken) == "crashed"
    # SGLang's notice about optional model modules is no broken stack
    notice = "[TP0] Ignore import error when loading sglang.srt.models.nemotron_h: No module named 'cuda'"
    hang = classify([notice, "Capture cuda graph begin."], exited=True, returncode=1)
    assert hang.failure_class == "crashed" and "broken software stack" not in hang.evidence


def test_collector_prefixes_are_stripped():
    frames = [
        "(WorkerDict pid=12) Traceback (most recent call last):",
        f'(WorkerDict pid=12)   File "{SITE}/sglang/srt/server_args.py", line 3, in check',
        "(WorkerDict pid=12) AssertionError: tp_size must divide dp_size",
    ]
    assert cls(frames) == "invalid-args"
    compose = [
        f'sglang-1  |   File "{SITE}/sglang/srt/managers/scheduler.py", line 3, in run',
        "sglang-1  | KeyError: 'w'",
    ]
    assert cls(compose) == "crashed"


def test_a_running_server_that_never_became_healthy_times_out():
    failure = classify(["Load weight begin.", "Capture cuda graph begin."], exited=False, returncode=None)
    assert failure.as_tuple() == ("startup-timeout", "Capture cuda graph begin.")
    assert cls(["CUDA out of memory. Tried to allocate"], exited=False, rc=None) == "oom"
