"""Faults the stand-in can reproduce, each with the symptom the real server shows.

Chosen for every launch by `BWTUNE_STANDIN_FAULT=<name>[:<arg>]`, or per config by a
profile rule whose `match` holds for the launch flags (the environment wins).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from bwtune.standin.profile import Profile

FAULT_ENV = "BWTUNE_STANDIN_FAULT"

# name -> (argument meaning or None, what happens)
FAULTS: dict[str, tuple[str | None, str]] = {
    "exit-at-start": (None, "argument processing raises; traceback, exit 1, before /health answers"),
    "unsupported-kernel": (
        "backend name (default: the MoE runner)",
        "CUDA graph capture fails: 'no kernel image is available' (FlashInfer's 'Unsupported "
        "architecture' for trtllm backends), wrapped in SGLang's capture message; exit 1",
    ),
    "hybrid-attention": (
        "attention backend (default: the one in use)",
        "SGLang's assert that hybrid GDN models on Blackwell take triton, trtllm_mha or flashinfer; exit 1",
    ),
    "moe-not-implemented": (
        "MoE runner (default: the one in use)",
        "SGLang's NotImplementedError: no NVFP4 MoE path for that runner "
        "(cutlass at load, others at capture)",
    ),
    "oom-graph-capture": (
        None,
        "CUDA out of memory during CUDA graph capture, in SGLang's capture message; exit 1",
    ),
    "never-healthy": (None, "loads, then /health answers 503 forever"),
    "crash-after": (
        "N requests (default 1)",
        "the N+1-th request kills the server mid-stream; exit -9 style",
    ),
    "garbage": ("repeat (default) | nan", "repeat: '!' repeated; nan: sampling error text in responses"),
    "garbage-above-batch": (
        "batch size N (default 8)",
        "a request that arrives while N or more are in the server gets '!' repeated; "
        "smaller batches are fine",
    ),
    "slow-startup": ("extra seconds (default 600), not scaled", "start-up takes that much longer"),
    "port-in-use": (None, "uvicorn's bind error for the port; exit 1"),
}
ALIASES = {"oom": "oom-graph-capture", "crash": "crash-after", "nan": "garbage:nan"}
# Faults whose argument is an integer: default, and the least value that makes sense.
_INT_ARG = {"crash-after": 1, "garbage-above-batch": 8}
_INT_MIN = {"crash-after": 0, "garbage-above-batch": 1}


class FaultError(ValueError):
    pass


@dataclass(frozen=True)
class Fault:
    name: str
    arg: str | None
    origin: str  # "env" or the profile rule's why

    def int_arg(self, default: int) -> int:
        if self.arg is None or self.arg == "":
            return default
        try:
            return int(self.arg)
        except ValueError:
            raise FaultError(f"{self.origin}: {self.name} takes an integer, not {self.arg!r}") from None

    def float_arg(self, default: float) -> float:
        if self.arg is None or self.arg == "":
            return default
        try:
            return float(self.arg)
        except ValueError:
            raise FaultError(
                f"{self.origin}: {self.name} takes a number of seconds, not {self.arg!r}"
            ) from None


def parse_fault(text: str, origin: str) -> Fault:
    text = ALIASES.get(text, text)
    name, _, arg = text.partition(":")
    name = ALIASES.get(name, name)
    if name not in FAULTS:
        raise FaultError(f"{origin}: unknown fault {name!r} (known: {', '.join(FAULTS)})")
    if name == "garbage" and arg not in ("", "repeat", "nan"):
        raise FaultError(f"{origin}: garbage takes repeat or nan, not {arg!r}")
    fault = Fault(name, arg or None, origin)
    # A bad argument is refused now, at start, not when the fault first acts.
    if name in _INT_ARG:
        if fault.int_arg(_INT_ARG[name]) < _INT_MIN[name]:
            raise FaultError(f"{origin}: {name} takes an integer >= {_INT_MIN[name]}, not {arg!r}")
    elif name == "slow-startup" and fault.float_arg(600.0) < 0:
        raise FaultError(f"{origin}: slow-startup takes a number of seconds >= 0, not {arg!r}")
    elif FAULTS[name][0] is None and arg:
        raise FaultError(f"{origin}: {name} takes no argument, not {arg!r}")
    return fault


def choose_fault(profile: Profile, flags: dict[str, Any]) -> Fault | None:
    env = os.environ.get(FAULT_ENV, "").strip()
    if env:
        return parse_fault(env, FAULT_ENV)
    for rule in profile.faults:
        if rule.match.matches(flags):
            return parse_fault(rule.fault, f"{profile.path}: fault rule") if rule.fault else None
    return None


# ----------------------------------------------------------------------------- symptoms
# What SGLang 0.5.23 prints for each failure: frames (file, line, function) and wordings
# taken from its source (the oracle venv, tests/oracle/make_venv.sh) and from real logs
# (tests/fixtures/failure_logs/, each with the issue thread it was copied from).

_SITE = "/usr/local/lib/python3.12/dist-packages"
_TS = "2026-01-01 00:00:00"

# Frames are real 0.5.23 files, lines and statements; where a chain was not verified in the
# source, its middle frames are left out (a traceback here is abridged, never invented).
# launch_server.py: argument processing; the frame that raised comes from the recorded
# verdict of real SGLang (sglang_verdicts.json: where, function, statement).
_ARGUMENT_FRAMES = (
    ("<frozen runpy>", 198, "_run_module_as_main", None),
    ("sglang/launch_server.py", 81, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
)
# srt/managers/scheduler.py run_scheduler_process -> Scheduler -> TpModelWorker -> ModelRunner.
_SCHEDULER_FRAMES = (
    (
        "sglang/srt/managers/scheduler.py",
        6362,
        "run_scheduler_process",
        "scheduler = Scheduler(server_args, port_args)",
    ),
    ("sglang/srt/managers/scheduler.py", 568, "__init__", "self.init_model_worker()"),
    ("sglang/srt/managers/scheduler.py", 1130, "init_model_worker", "self.init_tp_model_worker()"),
    (
        "sglang/srt/managers/scheduler.py",
        1033,
        "init_tp_model_worker",
        "self.tp_worker = TpModelWorker(**worker_kwargs)",
    ),
    ("sglang/srt/managers/tp_worker.py", 319, "__init__", "self._init_model_runner()"),
    ("sglang/srt/managers/tp_worker.py", 487, "_init_model_runner", "self._model_runner = ModelRunner("),
    ("sglang/srt/model_executor/model_runner.py", 499, "__init__", "self.initialize()"),
)
_LOAD_FRAMES = (
    *_SCHEDULER_FRAMES,
    ("sglang/srt/model_executor/model_runner.py", 715, "initialize", "self.load_model()"),
)
_CAPTURE_FRAMES = (
    *_SCHEDULER_FRAMES,
    ("sglang/srt/model_executor/runner/decode_cuda_graph_runner.py", 602, "__init__", "raise Exception("),
)
_SERVING_FRAMES = (
    ("sglang/srt/managers/scheduler.py", 6368, "run_scheduler_process", "scheduler.run_event_loop()"),
    ("sglang/srt/managers/scheduler.py", 1989, "run_event_loop", "dispatch_event_loop(self)"),
    ("sglang/srt/managers/scheduler.py", 6231, "dispatch_event_loop", "scheduler.event_loop_overlap()"),
    ("sglang/srt/managers/scheduler.py", 2109, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
)
# Raising frames of load-time refusals (0.5.23 source).
NVFP4_MOE_CUTLASS_FRAME = (
    "sglang/srt/layers/quantization/modelopt_quant.py",
    3145,
    "create_moe_runner",
    "raise NotImplementedError(",
)
HYBRID_ATTENTION_FRAME = (
    "sglang/srt/layers/attention/attention_registry.py",
    473,
    "attn_backend_wrapper",
    "assert prefill_be in allowed and decode_be in allowed, (",
)
# srt/model_executor/runner_backend_utils/__init__.py CUDA_GRAPH_CAPTURE_FAILED_MSG (0.5.23)
CAPTURE_FAILED_ADVICE = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
    "(Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)
# CUDA's and PyTorch's wordings (tests/fixtures/failure_logs/03-, 14-, 30-).
NO_KERNEL_IMAGE = "CUDA error: no kernel image is available for execution on the device"
CUDA_ERROR_ADVICE = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
ILLEGAL_MEMORY_ACCESS = "CUDA error: an illegal memory access was encountered"
# FlashInfer's trtllm-gen runners accept SM100/SM103 only (failure_logs/08-).
TRTLLM_UNSUPPORTED_ARCHITECTURE = (
    "Error in function 'TllmGenFmhaRunner' at /workspace/include/flashinfer/trtllm/fmha/"
    "fmhaRunner.cuh:30: Unsupported architecture"
)
# torch.multinomial on NaN/inf probabilities.
NAN_MESSAGE = "probability tensor contains either `inf`, `nan` or element < 0"
SIGQUIT_LINE = f"[{_TS}] Received sigquit from a child process. It usually means the child failed.\n"


def _frames(frames: tuple[tuple[str, int, str, str | None], ...]) -> str:
    out = []
    for path, line, fn, statement in frames:
        where = path if path.startswith("<") else f"{_SITE}/{path}"
        out.append(f'  File "{where}", line {line}, in {fn}\n')
        if statement:
            out.append(f"    {statement}\n")
    return "".join(out)


def argument_traceback(
    exc_type: str,
    message: str,
    where: str | None = None,
    function: str | None = None,
    statement: str | None = None,
) -> str:
    """SGLang's argument processing refusing the flags; `where` (sglang/...py:LINE), the
    function and the statement are the raising frame real SGLang's verdict recorded."""
    frames = _frames(_ARGUMENT_FRAMES)
    if where and ":" in where:
        path, _, line = where.rpartition(":")
        if line.isdigit():
            frames += _frames(((path, int(line), function or "<module>", statement),))
    exc = f"{exc_type}: {message}" if message else exc_type
    return f"Traceback (most recent call last):\n{frames}{exc}\n"


def _scheduler_exception(frames: str, exc_line: str) -> str:
    return (
        f"[{_TS} TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        f"{frames}{exc_line}\n\n{SIGQUIT_LINE}"
    )


def load_traceback(exc_type: str, message: str, raised_at: tuple[str, int, str, str] | None = None) -> str:
    """An exception while the model loads (scheduler process), then the launcher's sigquit."""
    frames = _LOAD_FRAMES + ((raised_at,) if raised_at else ())
    return _scheduler_exception(_frames(frames), f"{exc_type}: {message}")


def capture_traceback(cause: str) -> str:
    """SGLang wraps any error of CUDA graph capture (kernels as much as memory) this way."""
    return _scheduler_exception(
        _frames(_CAPTURE_FRAMES), f"Exception: Capture cuda graph failed: {cause}\n{CAPTURE_FAILED_ADVICE}"
    )


def serving_traceback(exc_type: str, message: str) -> str:
    """The scheduler's event loop dying while it serves (a crash mid-request)."""
    return _scheduler_exception(_frames(_SERVING_FRAMES), f"{exc_type}: {message}\n{CUDA_ERROR_ADVICE}")


def unsupported_kernel_message(backend: str) -> str:
    """What the kernel library says when it has no code for this GPU."""
    if "trtllm" in backend:
        return TRTLLM_UNSUPPORTED_ARCHITECTURE
    return NO_KERNEL_IMAGE


def oom_message(gpu_index: int, total_mib: int, used_mib: int, request_mib: int = 2048) -> str:
    """PyTorch's CUDA out-of-memory message (torch 2.9+ wording, failure_logs/25-)."""
    free_gib = max(0.0, (total_mib - used_mib) / 1024)
    return (
        f"CUDA out of memory. Tried to allocate {request_mib / 1024:.2f} GiB. GPU {gpu_index} has a total "
        f"capacity of {total_mib / 1024:.2f} GiB of which {free_gib:.2f} GiB is free. Including "
        f"non-PyTorch memory, this process has {used_mib / 1024:.2f} GiB memory in use. Of the allocated "
        f"memory {used_mib / 1024 * 0.97:.2f} GiB is allocated by PyTorch, and "
        f"{used_mib / 1024 * 0.03:.2f} GiB is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
        "avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def hybrid_attention_message(backend: str) -> str:
    """srt/layers/attention/attention_registry.py:473-476 on SM120 (0.5.23)."""
    return (
        "Only {'triton', 'trtllm_mha', 'flashinfer'} backends are supported on Blackwell GPUs for "
        f"hybrid GDN models. Got prefill={backend}, decode={backend}."
    )


def moe_not_implemented_message(backend: str) -> str:
    """srt/layers/quantization/modelopt_quant.py:3145 (cutlass) and :3366 (others), 0.5.23."""
    if backend == "cutlass":
        return (
            "moe_runner_backend=cutlass is not supported for NVFP4 MoE. "
            "Use --moe-runner-backend flashinfer_cutlass instead."
        )
    return (
        f"Unsupported moe_runner_backend for NVFP4 MoE: {backend}. "
        "Use --moe-runner-backend flashinfer_cutlass instead."
    )


def port_in_use_message(host: str, port: int) -> str:
    """uvicorn's bind error."""
    return (
        f"ERROR:    [Errno 98] error while attempting to bind on address ('{host}', {port}): "
        "address already in use\n"
    )
