"""`bwtune-standin`: takes `python -m sglang.launch_server`'s argv and behaves like SGLang on
the profile's simulated GPUs: validates, "loads" the checkpoint, serves SGLang's HTTP API
with simulated timing, and fails the way the real server fails. See docs/standin.md.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import os
import signal
import sys
import time
from typing import Any

from bwtune.standin import config_file, faults, startup_cache, verdicts
from bwtune.standin.app import SIMULATED_NOTE, App, ServerState, crash_now
from bwtune.standin.args import ParsedArgs, flag_table, parse
from bwtune.standin.checkpoint import CheckpointError, read_checkpoint
from bwtune.standin.gpu_state import MemoryRecord
from bwtune.standin.httpserver import start
from bwtune.standin.performance import ConfigPerformance, max_running_requests
from bwtune.standin.profile import ProfileError, load_profile

STARTUP_SCALE_ENV = "BWTUNE_STANDIN_STARTUP_SCALE"
SEED_ENV = "BWTUNE_STANDIN_SEED"
GRAPH_MIB = 2048  # CUDA graph buffers per GPU (assumption)
DEFAULT_MEM_FRACTION = 0.85  # what SGLang picks for ~96 GB boards at TP8 when unset (assumption)


class StartupFailure(Exception):
    def __init__(self, text: str, code: int = 1) -> None:
        super().__init__(text)
        self.text, self.code = text, code


def log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    sys.stdout.write(f"[{stamp}] {message}\n")
    sys.stdout.flush()


def _bad_env(name: str, value: str, why: str) -> StartupFailure:
    return StartupFailure(f"bwtune-standin: {name}={value!r}: {why}\n", 2)


def startup_scale() -> float:
    raw = os.environ.get(STARTUP_SCALE_ENV, "1.0")
    try:
        scale = float(raw)
    except ValueError:
        raise _bad_env(STARTUP_SCALE_ENV, raw, "not a number") from None
    if scale < 0:
        raise _bad_env(STARTUP_SCALE_ENV, raw, "must be >= 0")
    return scale


def choose_seed(args: ParsedArgs, normalized: dict[str, Any]) -> int:
    raw = os.environ.get(SEED_ENV)
    if raw:
        try:
            return int(raw)
        except ValueError:
            raise _bad_env(SEED_ENV, raw, "not an integer") from None
    if args.explicit.get("random-seed") is not None:
        return int(args.explicit["random-seed"])
    # Same config, same numbers: the seed follows the flags.
    text = json.dumps(normalized, sort_keys=True, default=str)
    return int.from_bytes(hashlib.blake2s(text.encode(), digest_size=4).digest(), "big")


def gpu_indices(args: ParsedArgs, count: int) -> list[int]:
    visible_raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = list(range(count))
    if visible_raw is not None and visible_raw.strip() != "":
        try:
            visible = [int(x) for x in visible_raw.split(",") if x.strip()]
        except ValueError:
            raise _bad_env(
                "CUDA_VISIBLE_DEVICES", visible_raw, "the stand-in understands GPU indices only"
            ) from None
    tp = int(args.get("tp-size", 1))
    pp = int(args.get("pp-size", 1))
    dp = 1 if args.get("enable-dp-attention") else int(args.get("dp-size", 1))
    base = int(args.get("base-gpu-id", 0))
    need = tp * pp * dp
    chosen = visible[base : base + need]
    if len(chosen) < need or any(i >= count for i in chosen):
        raise StartupFailure(
            faults.load_traceback(
                "RuntimeError",
                f"CUDA error: invalid device ordinal (the launch needs {need} GPUs from index {base}; "
                f"the simulated node has {count}, visible: {visible})",
            )
        )
    return chosen


def sglang_verdict(
    args: ParsedArgs, gpu: str, version: str, argv: list[str]
) -> tuple[dict[str, Any], verdicts.Verdict, bool]:
    """Real SGLang's verdict on the explicit flags (verdicts.py): (resolved flags, the verdict,
    whether it was recorded). Unrecorded flags go to real SGLang where it is importable, and
    are refused in one line where it is not: never accepted unchecked."""
    verdict = verdicts.lookup(version, gpu, dict(args.explicit))
    recorded = verdict is not None
    if verdict is None:
        try:
            verdict = verdicts.ask_sglang(version, gpu, argv, dict(args.explicit))
        except verdicts.MissingVerdict as exc:
            raise StartupFailure(f"bwtune-standin: {exc}\n", 2) from exc
    return dict(verdict.resolved), verdict, recorded


def prepare(argv: list[str]) -> tuple[ServerState, float]:
    """Everything SGLang does before it binds and loads: returns the state and start-up scale."""
    try:
        profile = load_profile()
    except ProfileError as exc:
        raise StartupFailure(f"bwtune-standin: {exc}\n", 2) from exc
    scale = startup_scale()
    try:
        table = flag_table(profile.sglang_version)
    except (ImportError, KeyError) as exc:
        raise StartupFailure(f"bwtune-standin: profile {profile.name}: {exc}\n", 2) from exc
    try:  # SGLang's --config file (the API key comes that way), merged as SGLang merges it
        argv = config_file.merge(argv, {n for n, f in table.items() if f.get("action") == "store_true"})
    except (OSError, ValueError) as exc:
        raise StartupFailure(f"ValueError: {exc}\n") from exc
    args = parse(argv, table)  # argparse exits 2 itself, with SGLang's usage line
    try:
        checkpoint = read_checkpoint(str(args.explicit["model-path"]))
    except CheckpointError as exc:
        raise StartupFailure(f"bwtune-standin: cannot load the model: {exc}\n") from exc
    normalized, verdict, recorded = sglang_verdict(args, profile.gpu.arch, profile.sglang_version, argv)
    if not verdict.ok:
        raise StartupFailure(
            faults.argument_traceback(
                verdict.error_type or "ValueError",
                verdict.error,
                verdict.where,
                verdict.function,
                verdict.statement,
            )
        )
    spec_algo = args.explicit.get("speculative-algorithm")
    if spec_algo and str(spec_algo).upper() in ("NEXTN", "EAGLE") and checkpoint.mtp_layers < 1:
        raise StartupFailure(
            faults.argument_traceback(
                "ValueError",
                f"{checkpoint.path}/config.json declares no MTP layers; "
                f"--speculative-algorithm {spec_algo} needs a draft",
            )
        )
    # Match profile rules on what SGLang would hold: the given flags as SGLang resolved them.
    match_flags = {**args.explicit, **{k: v for k, v in normalized.items() if v is not None}}
    perf = ConfigPerformance.for_flags(profile, match_flags)
    try:
        fault = faults.choose_fault(profile, match_flags)
    except faults.FaultError as exc:
        raise StartupFailure(f"bwtune-standin: {exc}\n", 2) from exc
    if fault is not None and fault.name == "exit-at-start":
        raise StartupFailure(
            faults.argument_traceback("ValueError", f"simulated failure at start ({fault.origin})")
        )
    max_running = max_running_requests(profile, perf, args.explicit)
    state = ServerState(
        args=args,
        checkpoint=checkpoint,
        profile=profile,
        perf=perf,
        fault=fault,
        served_model_name=str(args.get("served-model-name") or args.get("model-path")),
        api_key=args.get("api-key"),
        max_running=int(max_running),
        seed=choose_seed(args, match_flags),
    )
    state.verdict_recorded = recorded
    state.resolved = match_flags
    return state, scale


async def serve(state: ServerState, scale: float) -> int:
    profile, args, fault = state.profile, state.args, state.fault
    host, port = str(args.get("host", "127.0.0.1")), int(args.get("port", 30000))
    gpus = gpu_indices(args, profile.gpu.count)
    if fault is not None and fault.name == "port-in-use":
        raise StartupFailure(faults.port_in_use_message(host, port))
    app = App(state)
    try:
        server = await start(app, host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise StartupFailure(faults.port_in_use_message(host, port)) from exc
        raise StartupFailure(f"ERROR:    [Errno {exc.errno}] {exc.strerror}: ('{host}', {port})\n") from exc
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    memory = MemoryRecord(gpus, port)

    def crash() -> None:
        memory.release()
        crash_now(faults.ILLEGAL_MEMORY_ACCESS)

    state.crash = crash
    log(
        f"{SIMULATED_NOTE}; profile {profile.name}: "
        f"{profile.gpu.count}x {profile.gpu.name} ({profile.gpu.arch})"
    )
    # SGLang logs its whole ServerArgs at start (`logger.info(f"{server_args=}")`), secrets
    # included (api_key, admin_api_key): the stand-in does the same, so whatever keeps a
    # server's log must mask them itself. SGLang does not print its environment.
    log(f"server_args={server_args_repr(args)}")
    if not state.verdict_recorded:
        log(
            "[simulated] no recorded SGLang verdict for these flags (src/bwtune/standin/"
            "sglang_verdicts.json): real SGLang's own argument processing gave it"
        )
    for reason in state.perf.reasons:
        log(f"[simulated timing] {reason}")
    if fault is not None:
        log(f"[simulated fault] {fault.name}{':' + fault.arg if fault.arg else ''} ({fault.origin})")
    try:
        return await _start_up_and_serve(state, scale, memory, gpus, stop)
    finally:
        server.close()
        memory.release()


def server_args_repr(args: ParsedArgs) -> str:
    """`ServerArgs(model_path=..., ...)` as SGLang's dataclass repr shows it: every field,
    given or default, model_path first, then by name (the flag tables keep no field order)."""
    dests = dict(args.dests)
    names = sorted(args.values, key=lambda name: (name != "model-path", dests.get(name, name)))
    fields = ", ".join(f"{dests.get(name, name.replace('-', '_'))}={args.values[name]!r}" for name in names)
    return f"ServerArgs({fields})"


def _note(problem: str | None) -> None:
    """A cache marker that could not be written costs a later launch its saving, nothing else."""
    if problem:
        log(f"[simulated] start-up cache not updated: {problem}")


async def _pause(seconds: float, stop: asyncio.Event) -> bool:
    """Sleep, unless asked to stop first (returns True when stopping)."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=max(0.0, seconds))
        return True
    except TimeoutError:
        return False


async def _start_up_and_serve(
    state: ServerState,
    scale: float,
    memory: MemoryRecord,
    gpus: list[int],
    stop: asyncio.Event,
) -> int:
    profile, args, fault = state.profile, state.args, state.fault
    extra = fault.float_arg(600.0) if fault is not None and fault.name == "slow-startup" else 0.0
    total_mib = profile.gpu.memory_mib
    weights = profile.weights_mib_per_gpu
    # What the launch's cache directory saves it (simulated: marker files, not real caches).
    warm = startup_cache.plan(profile, state.resolved, str(args.explicit["model-path"]), os.environ)
    for line in warm.describe(profile):
        log(line)
    log(f"Load weight begin. avail mem={total_mib / 1024:.2f} GB (simulated)")
    memory.set_used(weights)
    if await _pause(warm.weight_load_s * scale + extra / 2, stop):
        return 0
    _note(startup_cache.remember_weights(warm))
    log(
        f"Load weight end. type={state.checkpoint.architecture}, quant={state.checkpoint.quantization}, "
        f"avail mem={(total_mib - weights) / 1024:.2f} GB, mem usage={weights / 1024:.2f} GB (simulated)"
    )
    name = fault.name if fault is not None else None
    moe = (fault.arg if fault is not None else None) or str(state.resolved.get("moe-runner-backend", "auto"))
    if name == "moe-not-implemented" and moe == "cutlass":
        message = faults.moe_not_implemented_message(moe)
        raise StartupFailure(
            faults.load_traceback("NotImplementedError", message, faults.NVFP4_MOE_CUTLASS_FRAME)
        )
    if name == "hybrid-attention":
        backend = (fault.arg if fault is not None else None) or str(state.resolved.get("attention-backend"))
        message = faults.hybrid_attention_message(backend)
        raise StartupFailure(faults.load_traceback("AssertionError", message, faults.HYBRID_ATTENTION_FRAME))
    fraction = float(args.get("mem-fraction-static") or DEFAULT_MEM_FRACTION)
    used = int(total_mib * fraction)
    kv_mib = max(0, used - weights - GRAPH_MIB)
    memory.set_used(used - GRAPH_MIB)
    state.memory = {
        "weight": round(weights / 1024, 2),
        "kvcache": round(kv_mib / 1024, 2),
        "token_capacity": kv_mib * 1024 // 64,  # assumption: ~64 KiB of KV state per token across layers
        "graph": round(GRAPH_MIB / 1024, 2),
        "simulated": True,
    }
    log(
        f"KV Cache is allocated. #tokens: {state.memory['token_capacity']}, "
        f"KV size: {kv_mib / 1024:.2f} GB (simulated)"
    )
    log("Capture cuda graph begin. This can take up to several minutes. (simulated)")
    capture = warm.capture_s * scale + extra / 2
    # Kernels first run during capture: SGLang reports what fails there as a capture failure.
    cause = None
    if name == "oom-graph-capture":
        cause = faults.oom_message(gpus[0], total_mib, used)
    elif name == "unsupported-kernel":
        cause = faults.unsupported_kernel_message(moe)
    elif name == "moe-not-implemented":
        cause = faults.moe_not_implemented_message(moe)
    if cause is not None:
        if await _pause(capture / 2, stop):
            return 0
        raise StartupFailure(faults.capture_traceback(cause))
    if await _pause(capture, stop):
        return 0
    memory.set_used(used)
    log(f"Capture cuda graph end. mem usage={GRAPH_MIB / 1024:.2f} GB (simulated)")
    _note(startup_cache.remember_kernels(warm, profile.gpu.arch))
    from bwtune.standin.engine import Engine

    state.engine = Engine(state.perf, state.seed, state.max_running)
    state.engine.start()
    state.startup_time = time.time() - state.started_at
    if fault is not None and fault.name == "never-healthy":
        log("Warmup request hangs (simulated fault never-healthy); /health stays 503")
        state.status = "unhealthy"
    else:
        state.status = "up"
        log("The server is fired up and ready to roll! (bwtune stand-in, simulated)")
    await stop.wait()
    log("Received SIGTERM, shutting down. (simulated)")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        state, scale = prepare(argv)
        return asyncio.run(serve(state, scale))
    except StartupFailure as failure:
        sys.stdout.flush()
        sys.stderr.write(failure.text)
        sys.stderr.flush()
        return failure.code


if __name__ == "__main__":
    sys.exit(main())
