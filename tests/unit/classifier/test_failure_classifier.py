"""Rules of the failure classifier, each on the smallest log that shows it."""

from __future__ import annotations

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.failure_classifier import classify

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


def test_accelerator_allocators_and_sglang_pools_running_out_are_oom():
    # Ascend's torch_npu, ROCm, the CUDA driver, SGLang's KV-pool allocator.
    assert cls(["torch_npu.memory: [ERROR] [1] NPU out of memory. Tried to allocate 450.00 MiB"]) == "oom"
    assert cls(["RuntimeError: HIP out of memory. Tried to allocate 2.00 GiB"]) == "oom"
    assert cls(["RuntimeError: hipErrorOutOfMemory"]) == "oom"
    assert cls(["RuntimeError: CUDA driver error: out of memory"]) == "oom"
    assert cls(["RuntimeError: Decode out of memory. Try to lower your batch size."]) == "oom"


def test_a_negative_profiled_token_budget_is_oom():
    line = "[TP0] max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value."
    assert cls([line]) == "oom"
    assert cls(["[TP0] max_total_num_tokens=-123, chunked_prefill_size=8192"]) == "oom"
    assert cls(["[TP0] max_total_num_tokens=56524, max_prefill_tokens=16384", "Killed"]) == "crashed"


def test_jit_toolchains_refusing_this_gpu_are_unsupported_hardware():
    refusals = [
        "ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'",
        "nvcc fatal   : Unsupported gpu architecture 'compute_120a'",
        "ptxas /tmp/x.ptx, line 6; error   : Feature '.tile::gather4' not supported on .target 'sm_120a'",
        "Arch conditional MMA instruction used without targeting appropriate compute capability. Aborting.",
        "RuntimeError: CUDA error: invalid device function",
        "AssertionError: fp8e4nv data type is not supported on CUDA arch < 89",
        "SGlang only supports sm 75 and  above",
    ]
    for line in refusals:
        assert cls([line]) == "unsupported-hardware", line


def test_an_exception_from_tritons_code_generation_is_unsupported_hardware():
    lowering = tb(
        "sglang/srt/layers/attention/triton_backend.py",
        "triton/compiler/compiler.py",
        "triton/backends/nvidia/compiler.py",
        exc="IndexError: map::at",
    )
    assert cls(lowering) == "unsupported-hardware"
    # Triton's OutOfResources is a hardware limit even when the quote cuts its message.
    cut = tb(
        "triton/compiler/compiler.py", exc="triton.runtime.errors.OutOfResources: out of resource: shared me"
    )
    assert cls(cut) == "unsupported-hardware"
    # The same exception from Triton's front end (the kernel's own Python) is no GPU refusal.
    frontend = tb(
        "sglang/srt/layers/attention/triton_backend.py", "triton/runtime/jit.py", exc="IndexError: x"
    )
    assert cls(frontend) == "crashed"


def test_a_model_architecture_this_sglang_lacks_is_a_crash_not_hardware_or_arguments():
    assert (
        cls(["ValueError: Model architectures ['Glm4ForCausalLM'] are not supported for now."]) == "crashed"
    )
    assert cls(["ValueError: Unsupported architectures: LlavaQwenForCausalLM"]) == "crashed"


def test_parallel_sizes_that_do_not_divide_the_model_are_an_argument_error_wherever_raised():
    # ensure_divisibility fails while the TP worker builds the model: past argument
    # processing by its frames, but the --tp size is what is wrong.
    layers = (
        "sglang/srt/managers/scheduler.py",
        "sglang/srt/models/qwen2.py",
        "sglang/srt/distributed/utils.py",
    )
    assert cls(tb(*layers, exc="AssertionError: 16 is not divisible by 6")) == "invalid-args"
    block = (
        "ValueError: Weight output_partition_size = 576 is not divisible by"
        " weight quantization block_n = 128."
    )
    assert cls(tb("sglang/srt/layers/quantization/fp8.py", exc=block)) == "invalid-args"
    # A quote cut after the assertion's source line, or in ensure_divisibility itself.
    cut = [*tb(*layers, exc="x")[:-1], '    assert numerator % denominator == 0, "{} is not divisible by {}"']
    assert cls(cut) == "invalid-args"
    frame = [*tb("sglang/srt/models/qwen2.py", exc="x")[:-1]]
    frame += [f'  File "{SITE}/sglang/srt/distributed/utils.py", line 20, in ensure_divisibility']
    assert cls(frame) == "invalid-args"
    # Other exceptions in the same frames stay crashes; memory and hardware still win.
    assert cls(tb(*layers, exc="AssertionError: shape mismatch")) == "crashed"
    assert cls(tb(*layers, exc="RuntimeError: 16 is not divisible by 6 CUDA out of memory")) == "oom"


def test_a_model_path_that_is_no_repo_id_is_an_argument_error_whatever_the_frames():
    # Raised in huggingface_hub's validators through transformers, no SGLang frame.
    hub = ("transformers/utils/hub.py", "huggingface_hub/utils/_validators.py")
    bad = "huggingface_hub.utils._validators.HFValidationError: Repo id must be in the form 'repo_name'"
    assert cls(tb(*hub, exc=bad)) == "invalid-args"
    assert cls([bad]) == "invalid-args"
    # Other hub errors (a network failure, a gated repo) are no flag error.
    assert cls(tb(*hub, exc="huggingface_hub.errors.GatedRepoError: 401 Client Error")) == "crashed"


def test_a_traceback_cut_inside_a_tensor_allocation_is_oom():
    building = ("sglang/srt/models/llama.py", "sglang/srt/layers/linear.py", "torch/utils/_device.py")
    cut = tb(*building, exc="x")[:-1]  # the quote ends in the frames, before the exception line
    assert cls(cut) == "oom"
    # Cut elsewhere, it stays a crash; with its exception line, the line decides.
    assert cls(tb(*building[:2], exc="x")[:-1]) == "crashed"
    assert cls(tb(*building, exc="RuntimeError: Expected all tensors to be on the same device")) == "crashed"
