"""Each way the stand-in fails reproduces the real server's symptom."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request

import pytest

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


def test_sglang_rule_refuses_at_start_with_traceback(launch):
    # SGLang 0.5.23 on SM120 refuses trtllm_mha attention with an FP8 KV cache in its argument
    # checks (planner rule trtllm-mha-fp8-kv-sm120, kind "sglang").
    code, log = finish(launch(*BASE, "--attention-backend", "trtllm_mha", "--kv-cache-dtype", "fp8_e4m3"))
    assert code == 1
    assert "Traceback (most recent call last):" in log and "ValueError: " in log
    assert "Load weight begin" not in log


def test_hardware_rule_fails_after_weight_load(launch, standin_env):
    started = time.monotonic()
    server = launch("--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_trtllm",
                    env={"BWTUNE_STANDIN_STARTUP_SCALE": "0.01"})  # fmt: skip
    code, log = finish(server)
    assert code == 1 and time.monotonic() - started >= 180 * 0.01  # the weight load happened first
    assert log.index("Load weight end") < log.index("NotImplementedError: ")
    assert "flashinfer_trtllm" in log and "sm120" in log.lower()


def test_fault_exit_at_start(launch):
    code, log = finish(launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "exit-at-start"}))
    assert code == 1 and "AssertionError: simulated failure at start" in log


def test_fault_unsupported_kernel_names_backend_and_sm(launch):
    code, log = finish(launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "unsupported-kernel:flashinfer_cutedsl"}))
    assert code == 1
    assert (
        "NotImplementedError: flashinfer_cutedsl kernels are not available for SM120 "
        "(compute capability 12.0)" in log
    )


def test_fault_oom_during_graph_capture(launch):
    code, log = finish(launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "oom"}))
    assert code == 1 and "Capture cuda graph begin" in log
    assert "torch.OutOfMemoryError: Capture cuda graph failed: CUDA out of memory." in log
    assert "--mem-fraction-static" in log


def test_profile_fault_rule_matches_flags(launch):
    code, log = finish(launch(*BASE, "--mem-fraction-static", "0.95"))
    assert code == 1 and "CUDA out of memory" in log


def test_fault_never_healthy(launch):
    server = launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "never-healthy"})
    deadline = time.monotonic() + 5
    while "Warmup request hangs" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.get("/health")[0] == 503 and server.proc.poll() is None


def test_fault_slow_startup_is_not_scaled(launch):
    server = launch(*BASE, env={"BWTUNE_STANDIN_FAULT": "slow-startup:3"})
    time.sleep(1.5)
    assert server.get("/health")[0] == 503
    server.wait_healthy(timeout=10)


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
