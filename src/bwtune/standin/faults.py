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
        "NotImplementedError naming the backend and SM after the simulated weight load; exit 1",
    ),
    "oom-graph-capture": (None, "torch.OutOfMemoryError during CUDA graph capture; exit 1"),
    "never-healthy": (None, "loads, then /health answers 503 forever"),
    "crash-after": (
        "N requests (default 1)",
        "the N+1-th request kills the server mid-stream; exit -9 style",
    ),
    "garbage": ("repeat (default) | nan", "repeat: '!' repeated; nan: sampling error text in responses"),
    "slow-startup": ("extra seconds (default 600), not scaled", "start-up takes that much longer"),
    "port-in-use": (None, "uvicorn's bind error for the port; exit 1"),
}
ALIASES = {"oom": "oom-graph-capture", "crash": "crash-after", "nan": "garbage:nan"}


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
            raise FaultError(f"{FAULT_ENV}: {self.name} takes an integer, not {self.arg!r}") from None

    def float_arg(self, default: float) -> float:
        if self.arg is None or self.arg == "":
            return default
        try:
            return float(self.arg)
        except ValueError:
            raise FaultError(
                f"{FAULT_ENV}: {self.name} takes a number of seconds, not {self.arg!r}"
            ) from None


def parse_fault(text: str, origin: str) -> Fault:
    text = ALIASES.get(text, text)
    name, _, arg = text.partition(":")
    name = ALIASES.get(name, name)
    if name not in FAULTS:
        raise FaultError(f"{origin}: unknown fault {name!r} (known: {', '.join(FAULTS)})")
    if name == "garbage" and arg not in ("", "repeat", "nan"):
        raise FaultError(f"{origin}: garbage takes repeat or nan, not {arg!r}")
    return Fault(name, arg or None, origin)


def choose_fault(profile: Profile, flags: dict[str, Any]) -> Fault | None:
    env = os.environ.get(FAULT_ENV, "").strip()
    if env:
        return parse_fault(env, FAULT_ENV)
    for rule in profile.faults:
        if rule.match.matches(flags):
            return parse_fault(rule.fault, f"{profile.path}: fault rule") if rule.fault else None
    return None


# ----------------------------------------------------------------------------- symptoms
# Tracebacks shaped like the real ones (paths and frames from SGLang 0.5.23's launch path).

_SITE = "/usr/local/lib/python3.12/dist-packages"


def argument_traceback(exc_type: str, message: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
        f'  File "{_SITE}/sglang/launch_server.py", line 32, in <module>\n'
        "    server_args = prepare_server_args(sys.argv[1:])\n"
        f'  File "{_SITE}/sglang/srt/server_args.py", line 5102, in prepare_server_args\n'
        "    return ServerArgs.from_cli_args(raw_args)\n"
        f'  File "{_SITE}/sglang/srt/server_args.py", line 731, in __post_init__\n'
        "    self._handle_gpu_memory_settings(gpu_mem)\n"
        f"{exc_type}: {message}\n"
    )


def load_traceback(exc_type: str, message: str) -> str:
    return (
        "[2026-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        f'  File "{_SITE}/sglang/srt/managers/scheduler.py", line 3118, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
        f'  File "{_SITE}/sglang/srt/model_executor/model_runner.py", line 402, in load_model\n'
        "    self.model = get_model(model_config=self.model_config, load_config=self.load_config)\n"
        f'  File "{_SITE}/sglang/srt/layers/moe/fused_moe_triton/layer.py", line 241, in __init__\n'
        "    self.quant_method.create_moe_runner(self, self.moe_runner_config)\n"
        f"{exc_type}: {message}\n"
        "\n[2026-01-01 00:00:00] Received sigquit from a child process. It usually means the child failed.\n"
    )


def unsupported_kernel_message(backend: str, gpu_arch: str, capability: str) -> str:
    return (
        f"{backend} kernels are not available for {gpu_arch.upper()} (compute capability {capability}); "
        "FlashInfer builds them for SM100/SM103 only"
    )


def oom_message(gpu_index: int, total_mib: int, used_mib: int) -> str:
    free_gib = max(0.0, (total_mib - used_mib) / 1024)
    return (
        "Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. "
        f"GPU {gpu_index} has a total capacity of {total_mib / 1024:.2f} GiB "
        f"of which {free_gib:.2f} GiB is free. "
        f"Process {os.getpid()} has {used_mib / 1024:.2f} GiB memory in use.\n"
        "Possible solutions:\n"
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
        "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
        "3. disable torch compile by not using --enable-torch-compile\n"
        "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose"
    )


NAN_MESSAGE = "probability tensor contains either `inf`, `nan` or element < 0"


def port_in_use_message(host: str, port: int) -> str:
    return (
        f"ERROR:    [Errno 98] error while attempting to bind on address ('{host}', {port}): "
        "address already in use\n"
    )
