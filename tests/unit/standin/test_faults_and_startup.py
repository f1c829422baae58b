"""Each way the stand-in fails reproduces the real server's symptom."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import re
import socket
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.failure_classifier import classify
from bwtune.standin import verdicts
from bwtune.standin.args import flag_table, parse
from bwtune.standin.faults import FaultError, parse_fault

BASE = ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass", "--tp-size", "8"]


def finish(server, timeout: float = 30) -> tuple[int, str]:
    code = server.proc.wait(timeout)
    return code, server.log()


def test_unknown_flag_and_bad_choice_exit_2_like_argparse(launch):
    code, log = finish(launch(*BASE, "--no-such-flag", "1"))
    assert code == 2 and "launch_server.py: error: unrecognized arguments: --no-such-flag" in log
    code, log = finish(launch("--moe-runner-backend", "warp_drive"))
    assert code == 2 and "argument --moe-runner-backend: invalid choice: 'warp_drive'" in log


def test_missing_model_path_is_required(launch):
    server = launch(model="")
    code, log = finish(server)
    assert code != 0 and "cannot load the model" in log


@pytest.mark.parametrize(
    ("files", "needle"),
    [
        ({}, "config.json: missing"),
        ({"config.json": "{not json"}, "config.json: not valid JSON (line 1"),
        ({"config.json": '{"architectures": []}'}, "'architectures' must be a non-empty list"),
        (
            {
                "config.json": '{"architectures": ["X"]}',
                "hf_quant_config.json": '{"quantization": {"quant_algo": "W2"}}',
            },
            "quant_algo 'W2' is not one SGLang knows",
        ),
    ],
)
def test_broken_checkpoint_fails_at_start(launch, tmp_path, files, needle):
    model = tmp_path / "model"
    model.mkdir()
    for name, text in files.items():
        (model / name).write_text(text)
    code, log = finish(launch(*BASE, model=model))
    assert code == 1 and needle in log and "/health" not in log


def classified(code: int, log: str) -> str:
    """The class the sweep gives this exit (the classifier built on real SGLang logs)."""
    return classify(log.splitlines(), exited=True, returncode=code).failure_class


def test_refusals_are_real_sglangs_recorded_verdicts(launch):
    # SGLang 0.5.23 on SM120 refuses trtllm_mha attention with an FP8 KV cache in its argument
    # processing; the stand-in says what real SGLang said (sglang_verdicts.json), not the planner.
    flags = [*BASE, "--attention-backend", "trtllm_mha", "--kv-cache-dtype", "fp8_e4m3"]
    explicit = parse(["--model-path", "m", *flags], flag_table("0.5.23")).explicit
    verdict = verdicts.lookup("0.5.23", "sm120", explicit)
    assert verdict is not None and not verdict.ok and verdict.where
    code, log = finish(launch(*flags))
    assert code == 1 and "Load weight begin" not in log
    assert f"{verdict.error_type}: {verdict.error}" in log
    assert verdict.where.split(":")[0] in log  # the frame that raised, as real SGLang raised it
    assert classified(code, log) == "invalid-args"


@pytest.mark.slow  # waits on a stand-in's simulated start-up or release delay (2-4 s)
def test_hardware_fault_rule_fails_in_graph_capture_after_weight_load(launch, standin_env):
    started = time.monotonic()
    server = launch("--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_trtllm",
                    env={"BWTUNE_STANDIN_STARTUP_SCALE": "0.01"})  # fmt: skip
    code, log = finish(server)
    assert code == 1 and time.monotonic() - started >= 180 * 0.01  # the weight load happened first
    assert log.index("Load weight end") < log.index("Capture cuda graph failed: ")
    assert "Unsupported architecture" in log  # FlashInfer's trtllm-gen runners: SM100 only
    assert classified(code, log) == "unsupported-hardware"


def test_fault_exit_at_start(launch):
    code, log = finish(launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "exit-at-start"}))
    assert code == 1 and "ValueError: simulated failure at start" in log
    assert classified(code, log) == "invalid-args"


def test_fault_unsupported_kernel_says_what_cuda_says(launch):
    code, log = finish(launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "unsupported-kernel:flashinfer_cutedsl"}))
    assert code == 1
    assert (
        "Exception: Capture cuda graph failed: CUDA error: no kernel image is available for "
        "execution on the device" in log
    )
    assert "Received sigquit from a child process" in log
    assert classified(code, log) == "unsupported-hardware"


def test_fault_oom_during_graph_capture(launch):
    code, log = finish(launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "oom"}))
    assert code == 1 and "Capture cuda graph begin" in log
    assert "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate" in log
    assert "1. set --mem-fraction-static to a smaller value" in log
    assert classified(code, log) == "oom"


def test_profile_fault_rule_matches_flags(launch):
    code, log = finish(launch(*BASE, "--mem-fraction-static", "0.95"))
    assert code == 1 and "CUDA out of memory" in log


def test_fault_never_healthy(launch):
    server = launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "never-healthy"})
    deadline = time.monotonic() + 60  # a deadline, not a measure: a loaded machine starts slowly
    while "Warmup request hangs" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.get("/health")[0] == 503 and server.proc.poll() is None


@pytest.mark.slow  # waits on a stand-in's simulated start-up or release delay (2-4 s)
def test_fault_slow_startup_is_not_scaled(launch):
    # 8 s whatever BWTUNE_STANDIN_STARTUP_SCALE says (scaled, it would be healthy at once):
    # its first answer, which a busy machine may delay by seconds, is still "starting".
    server = launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "slow-startup:8"})
    deadline = time.monotonic() + 30
    while True:
        try:
            status = server.get("/health")[0]
            break
        except (urllib.error.URLError, ConnectionError):  # not listening yet
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)
    assert status == 503
    server.wait_healthy(timeout=30)


def test_fault_crash_after_n_requests(launch):
    server = launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "crash-after:2"})
    server.wait_healthy()
    for _ in range(2):
        assert (
            server.post("/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 3}})[0] == 200
        )
    with pytest.raises((urllib.error.URLError, OSError, http.client.HTTPException)):
        req = urllib.request.Request(server.url + "/generate", data=json.dumps(
            {"input_ids": [1], "sampling_params": {"max_new_tokens": 50}, "stream": True}
        ).encode())  # fmt: skip
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
    assert server.proc.wait(10) == -9
    assert "RuntimeError: CUDA error: an illegal memory access" in server.log()


def test_fault_garbage_repeat_and_nan(launch):
    server = launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "garbage"})
    server.wait_healthy()
    out = json.loads(
        server.post(
            "/generate", {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 6}}
        )[1]
    )
    assert out["text"] == "!!!!!!"
    server.stop()
    nan = launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "garbage:nan"})
    nan.wait_healthy()
    status, body = nan.post("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 6}})
    assert status == 500 and "probability tensor contains either `inf`, `nan` or element < 0" in body.decode()
    status, body = nan.post(
        "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert status == 500 and "probability tensor contains" in json.loads(body)["message"]


def test_fault_garbage_above_batch_corrupts_only_large_batches(launch):
    server = launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "garbage-above-batch:4"})
    server.wait_healthy()

    def ask(i: int) -> str:
        body = {"input_ids": [1000 + i] * 8, "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}}
        status, raw = server.post("/generate", body)
        assert status == 200
        return str(json.loads(raw)["text"])

    alone = ask(0)
    assert "!" not in alone and len(alone.split()) == 12
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        texts = list(pool.map(ask, range(12)))
    broken = [t for t in texts if t == "!" * 12]
    assert 0 < len(broken) < 12, texts  # the first few of the batch are fine, the rest garbage


def test_port_in_use_real_and_simulated(launch):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, log = finish(launch(*BASE, port=port))
        assert (
            code == 1
            and f"error while attempting to bind on address ('127.0.0.1', {port}): address already in use"
            in log
        )
    code, log = finish(launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "port-in-use"}))
    assert code == 1 and "[Errno 98]" in log


def test_bad_fault_and_scale_are_one_line_errors(launch):
    code, log = finish(launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "meteor"}))
    assert code == 2 and log.strip().splitlines() == [log.strip()] and "unknown fault 'meteor'" in log
    code, log = finish(launch(*BASE, env={"BWTUNE_STANDIN_STARTUP_SCALE": "fast"}))
    assert code == 2 and "BWTUNE_STANDIN_STARTUP_SCALE='fast': not a number" in log


@pytest.mark.parametrize(
    ("fault", "needle"),
    [
        ("crash-after:abc", "crash-after takes an integer, not 'abc'"),
        ("crash-after:-1", "crash-after takes an integer >= 0, not '-1'"),
        ("slow-startup:soon", "slow-startup takes a number of seconds, not 'soon'"),
        ("never-healthy:5", "never-healthy takes no argument, not '5'"),
        ("garbage-above-batch:x", "garbage-above-batch takes an integer, not 'x'"),
    ],
)
def test_bad_fault_argument_is_refused_when_parsed(fault, needle):
    with pytest.raises(FaultError, match=re.escape(needle)):
        parse_fault(fault, "BWTUNE_STANDIN_FAULT")


def test_bad_fault_argument_is_refused_at_start(launch):
    # Before: crash-after:abc started and served; only the first request failed on it.
    code, log = finish(launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "crash-after:abc"}), timeout=10)
    assert code == 2 and log.strip().splitlines() == [log.strip()], log
    assert "BWTUNE_STANDIN_FAULT: crash-after takes an integer, not 'abc'" in log
