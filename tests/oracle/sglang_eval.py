"""Evaluate SGLang launch arguments with the installed SGLang, as if on a given GPU.

Runs INSIDE an oracle venv (tests/oracle/make_venv.sh). Reads one JSON object on stdin:

    {"gpu": "sm120" | "sm100" | "sm90", "cases": [[argv...], ...]}

where each argv is what follows `python -m sglang.launch_server`. Writes a JSON list on
stdout, one entry per case:

    {"ok": bool, "error_type": str | null, "error": str | null, "where": str | null,
     "statement": str | null, "values": {flag-name-without-dashes: final value}}

`error` is the first line of the message (empty for a bare `assert`), `where` the
innermost SGLang source line that raised (path relative to site-packages), `statement`
the whole statement there, on one line (what a bare `assert` checked). `values` (on success only) holds every
flag the parser has, with the value SGLang settled on after its own processing.

Each case runs what launch_server runs for arguments, in that release's order:
0.5.2x: prepare_server_args, resolve_once, check_server_args; 0.5.9: prepare_server_args
(ServerArgs.__post_init__ does the work), check_server_args. It runs in a forked child
of a process that has already imported SGLang, so no state (environment, caches,
module globals) leaks from one case to the next (~0.3 CPU-s a case).

The other request shape evaluates several GPUs' cases in one process, in-process
(~0.035 CPU-s a case):

    {"gpus": {"sm120": [[argv...], ...], "sm100": [...]}}  ->  {"sm120": [result...], ...}

SGLang's third-party dependencies (torch, transformers, ...) are imported once; then a
child per GPU simulates that GPU, imports SGLang and evaluates every case of that GPU in
turn, putting back after each case what argument processing may change: the environment
(SGLang's `envs` write to it), every sglang module's globals, and the functools caches in
those modules (a cached HF config is mutated in place by ModelConfig). The verdicts equal
the forked ones (tests/oracle/test_oracle_inprocess.py compares them).

The GPU is simulated below SGLang: torch.cuda's probes answer for eight GPUs of the
chosen kind, and a fake `nvidia-smi` on PATH answers SGLang's queries. NVML is absent,
so SGLang falls back to those.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import linecache
import os
import stat
import sys
import tempfile
import traceback
import types
from pathlib import Path
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sglang_parser import field_of, flag_actions, plain, server_args_fields, sglang_parser

GPU_COUNT = 8
CUDA_VERSION = "13.0"
CUDNN_VERSION = 91500  # cuDNN 9.15: what flashinfer_cudnn FP4 GEMM needs
DRIVER_VERSION = "580.95.05"

# name, compute capability, total memory (MiB, as nvidia-smi reports it), SMs,
# shared memory per block (opt-in, bytes)
GPUS: dict[str, dict[str, Any]] = {
    "sm120": {
        "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "capability": (12, 0),
        "memory_mib": 97887,
        "sms": 188,
        "smem_optin": 101376,
    },
    "sm100": {
        "name": "NVIDIA B200",
        "capability": (10, 0),
        "memory_mib": 183359,
        "sms": 148,
        "smem_optin": 232448,
    },
    "sm90": {
        "name": "NVIDIA H200",
        "capability": (9, 0),
        "memory_mib": 143771,
        "sms": 132,
        "smem_optin": 232448,
    },
}

_FAKE_NVIDIA_SMI = """#!{python}
import sys
args = " ".join(sys.argv[1:])
gpu = {gpu!r}
n = {count}
if "--list-gpus" in args or "-L" in sys.argv:
    for i in range(n):
        print(f"GPU {{i}}: {{gpu['name']}} (UUID: GPU-0000000{{i}})")
elif "memory.total" in args:
    print("\\n".join([str(gpu["memory_mib"])] * n))
elif "compute_cap" in args:
    print("\\n".join(["{{}}.{{}}".format(*gpu["capability"])] * n))
elif "driver_version" in args:
    print("\\n".join([{driver!r}] * n))
elif "name" in args:
    print("\\n".join([gpu["name"]] * n))
elif args.startswith("topo"):
    print("GPU0\\tX")
else:
    sys.exit("fake nvidia-smi: unsupported query: " + args)
"""


def simulate_gpu(kind: str, workdir: Path) -> None:
    """Make torch and nvidia-smi answer as eight GPUs of `kind` (before SGLang is imported)."""
    gpu = GPUS[kind]
    smi = workdir / "nvidia-smi"
    smi.write_text(
        _FAKE_NVIDIA_SMI.format(python=sys.executable, gpu=gpu, count=GPU_COUNT, driver=DRIVER_VERSION)
    )
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    os.environ["PATH"] = f"{workdir}{os.pathsep}{os.environ.get('PATH', '')}"

    import torch

    total = gpu["memory_mib"] * 1024 * 1024
    major, minor = gpu["capability"]
    props = types.SimpleNamespace(
        name=gpu["name"],
        major=major,
        minor=minor,
        total_memory=total,
        multi_processor_count=gpu["sms"],
        shared_memory_per_block_optin=gpu["smem_optin"],
        shared_memory_per_multiprocessor=gpu["smem_optin"] + 1024,
        L2_cache_size=128 * 1024 * 1024,
        warp_size=32,
        is_integrated=False,
        gcnArchName="",
        uuid="00000000-0000-0000-0000-000000000000",
    )
    probes = {
        "is_available": lambda: True,
        "device_count": lambda: GPU_COUNT,
        "current_device": lambda: 0,
        "get_device_capability": lambda device=None: (major, minor),
        "get_device_name": lambda device=None: gpu["name"],
        "get_device_properties": lambda device=None: props,
        "mem_get_info": lambda device=None: (total, total),
        "is_bf16_supported": lambda *a, **k: True,
    }
    for name, probe in probes.items():
        setattr(torch.cuda, name, probe)
    setattr(torch.version, "cuda", CUDA_VERSION)  # noqa: B010 (read-only to type checkers)
    setattr(torch.backends.cudnn, "version", lambda: CUDNN_VERSION)  # noqa: B010
    setattr(torch.backends.cudnn, "is_available", lambda: True)  # noqa: B010

    # The stubbed sgl_kernel defines no torch ops; SGLang registers fake (meta)
    # kernels for some at import time. Let those registrations pass as no-ops.
    register_fake = torch.library.register_fake

    def tolerant_register_fake(op: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(op, str) and op.startswith("sgl_kernel::"):
            return (lambda fn: fn) if not args else args[0]
        return register_fake(op, *args, **kwargs)

    setattr(torch.library, "register_fake", tolerant_register_fake)  # noqa: B010


def _parser_error(self: argparse.ArgumentParser, message: str) -> NoReturn:
    # argparse would print usage and exit 2; keep its message instead.
    raise argparse.ArgumentError(None, message)


def _sglang_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """Innermost frame of the traceback that lies in the sglang package."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if f"{os.sep}sglang{os.sep}" in frame.filename:
            found = frame
    return found


def _where(frame: traceback.FrameSummary | None) -> str | None:
    if frame is None:
        return None
    relative = frame.filename.split(f"{os.sep}sglang{os.sep}", 1)[1].replace(os.sep, "/")
    return f"sglang/{relative}:{frame.lineno}"


def _statement(frame: traceback.FrameSummary | None) -> str | None:
    """The whole statement that raised (an `assert` without a message says what it checked)."""
    if frame is None or frame.lineno is None:
        return None
    source = "".join(linecache.getlines(frame.filename))
    line = frame.lineno
    innermost: ast.stmt | None = None
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt):
            continue
        covers = node.lineno <= line <= (node.end_lineno or node.lineno)
        if covers and (innermost is None or node.lineno >= innermost.lineno):
            innermost = node
    text = ast.get_source_segment(source, innermost) if innermost is not None else frame.line
    return " ".join((text or "").split())[:300] or None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


@functools.cache
def _reading_parser() -> tuple[argparse.ArgumentParser, frozenset[str], dict[str, argparse.Action]]:
    """The release's parser, its ServerArgs fields and its flags: built once per process
    (only read, to name every flag's final value)."""
    parser = sglang_parser()
    return parser, server_args_fields(), flag_actions(parser)


def evaluate(argv: list[str]) -> dict[str, Any]:
    """What launch_server's argument processing makes of `argv` (call in a fresh child)."""
    from sglang.srt import server_args as sa_module

    argparse.ArgumentParser.error = _parser_error  # type: ignore[method-assign]
    staged = hasattr(sa_module.ServerArgs, "resolve_once")
    try:
        if staged:  # 0.5.2x: plugins, raw record, resolution pipeline, checks
            from sglang.srt.plugins import load_plugins

            load_plugins()
        server_args = sa_module.prepare_server_args(list(argv))
        if staged:
            server_args.resolve_once()
        server_args.check_server_args()
    except BaseException as exc:  # SGLang raises ValueError, AssertionError, RuntimeError, ...
        frame = _sglang_frame(exc)
        return {
            "ok": False,
            "error_type": type(exc).__name__,
            "error": _first_line(exc),
            "where": _where(frame),
            "statement": _statement(frame),
            "values": {},
        }

    resolved = server_args.resolved_dict() if staged else {}
    parser, fields, actions = _reading_parser()
    namespace = parser.parse_args(list(argv))
    values = {}
    for name, action in actions.items():
        field = field_of(action, fields)
        if field is None:  # a parser-only flag (--config, deprecated spellings)
            value = getattr(namespace, action.dest, None)
        elif staged:
            value = resolved.get(field, getattr(server_args, field))
        else:
            value = getattr(server_args, field)
        values[name] = plain(value)
    return {"ok": True, "error_type": None, "error": None, "where": None, "statement": None, "values": values}


def _run_forked(argv: list[str]) -> dict[str, Any]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: evaluate, send JSON, exit without running parent cleanups
        os.close(read_fd)
        os.dup2(2, 1)  # SGLang's prints must not reach our JSON on stdout
        try:
            result = evaluate(argv)
        except BaseException as exc:  # a bug here, not SGLang's verdict
            result = {"ok": False, "error_type": "OracleError", "error": repr(exc)}
            result.update(where=None, statement=None, values={})
        with os.fdopen(write_fd, "w") as out:
            json.dump(result, out)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        return {
            "ok": False,
            "error_type": "OracleError",
            "error": f"evaluation process died (wait status {status})",
            "where": None,
            "statement": None,
            "values": {},
        }
    answer: dict[str, Any] = json.loads(data)
    return answer


def _prewarm() -> None:
    """Import what every evaluation imports, once, before forking."""
    import importlib

    importlib.import_module("sglang.srt.server_args")  # a venv without it is broken: fail here
    for module in (
        "sglang.srt.plugins",
        "sglang.srt.arg_groups.pipeline",
        "sglang.srt.configs.model_config",
        "sglang.srt.layers.moe.utils",
        "sglang.srt.layers.quantization",
    ):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            # A missing dependency is an error; a module this release lacks is not.
            if exc.name is None or not (module + ".").startswith(exc.name + "."):
                raise


# GPU-independent imports that SGLang's import pulls in (~4 CPU-s): done once per release
# process, before any GPU is simulated (torch's probes are looked up at call time).
_SHARED_IMPORTS = (
    "torch",
    "transformers",
    "transformers.activations",
    "transformers.configuration_utils",
    "triton",
    "sympy",
    "numpy",
    "regex",
    "aiohttp",
    "networkx",
    "pydantic",
    "huggingface_hub",
    "compressed_tensors",
    "torch._dynamo",
    "torch._inductor.compile_fx",
    "IPython",
    "gguf",
    "zmq",
    "requests",
    "tvm_ffi",
    "msgspec",
    "sentencepiece",
    "starlette",
    "fastapi",
    "openai",
)


class _SGLangState:
    """What evaluating one case may change in this process, to be put back after it."""

    def __init__(self) -> None:
        self.environ = dict(os.environ)
        self._seen = -1
        self._modules: list[tuple[str, types.ModuleType]] = []
        self.saved = {name: dict(vars(module)) for name, module in self._sglang_modules()}

    def _sglang_modules(self) -> list[tuple[str, types.ModuleType]]:
        if len(sys.modules) != self._seen:  # a case imported more of SGLang
            self._seen = len(sys.modules)
            self._modules = [
                (name, module)
                for name, module in list(sys.modules.items())
                if isinstance(module, types.ModuleType) and (name == "sglang" or name.startswith("sglang."))
            ]
        return self._modules

    def restore(self) -> None:
        os.environ.clear()
        os.environ.update(self.environ)
        for name, module in self._sglang_modules():
            namespace = vars(module)
            saved = self.saved.get(name)
            if saved is not None:
                for key in [k for k in namespace if k not in saved]:
                    del namespace[key]
                for key, value in saved.items():
                    if namespace.get(key) is not value:
                        namespace[key] = value
            for value in list(namespace.values()):
                # type(), not getattr: sglang's LazyImport objects import on attribute access.
                if type(value) is functools._lru_cache_wrapper:
                    value.cache_clear()


def _evaluate_in_process(gpu: str, cases: list[list[str]], workdir: Path) -> list[dict[str, Any]]:
    """Every case on `gpu` in this process (a child forked for this GPU)."""
    simulate_gpu(gpu, workdir)
    _prewarm()
    state = _SGLangState()
    results = []
    for argv in cases:
        try:
            result = evaluate(argv)
        except BaseException as exc:  # a bug here, not SGLang's verdict
            result = {"ok": False, "error_type": "OracleError", "error": repr(exc)}
            result.update(where=None, statement=None, values={})
        results.append(result)
        state.restore()
    return results


def _run_gpu_child(gpu: str, cases: list[list[str]], workdir: Path) -> list[dict[str, Any]]:
    """Fork a child that simulates `gpu` and evaluates all its cases in-process."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        os.dup2(2, 1)  # SGLang's prints must not reach our JSON on stdout
        code = 0
        try:
            (workdir / gpu).mkdir()
            results = _evaluate_in_process(gpu, cases, workdir / gpu)
            with os.fdopen(write_fd, "w") as out:
                json.dump(results, out)
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        died = {"ok": False, "error_type": "OracleError", "error": f"{gpu} evaluator died ({status})"}
        died.update(where=None, statement=None, values={})
        return [dict(died) for _ in cases]
    answer: list[dict[str, Any]] = json.loads(data)
    return answer


def _main_in_process(gpus: dict[str, Any]) -> int:
    if not isinstance(gpus, dict) or not set(gpus) <= set(GPUS):
        print(f"sglang_eval: 'gpus' must map some of {sorted(GPUS)} to argv lists", file=sys.stderr)
        return 2
    if not all(isinstance(cs, list) and all(isinstance(c, list) for c in cs) for cs in gpus.values()):
        print("sglang_eval: each GPU's cases must be a list of argv lists", file=sys.stderr)
        return 2
    import contextlib
    import importlib

    for module in _SHARED_IMPORTS:
        with contextlib.suppress(ImportError):  # SGLang's own import says what is missing
            importlib.import_module(module)
    argparse.ArgumentParser.error = _parser_error  # type: ignore[method-assign]
    answers = {}
    with tempfile.TemporaryDirectory(prefix="bwtune-oracle-") as tmp:
        for gpu, cases in gpus.items():
            answers[gpu] = _run_gpu_child(gpu, [[str(a) for a in argv] for argv in cases], Path(tmp))
    json.dump(answers, sys.stdout)
    sys.stdout.write("\n")
    return 0


def main() -> int:
    request = json.load(sys.stdin)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if "gpus" in request:
        return _main_in_process(request["gpus"])
    gpu = request.get("gpu")
    if gpu not in GPUS:
        print(f"sglang_eval: unknown gpu {gpu!r} (want one of {sorted(GPUS)})", file=sys.stderr)
        return 2
    cases = request.get("cases")
    if not isinstance(cases, list) or not all(isinstance(c, list) for c in cases):
        print("sglang_eval: 'cases' must be a list of argv lists", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bwtune-oracle-") as tmp:
        simulate_gpu(gpu, Path(tmp))
        _prewarm()
        results = [_run_forked([str(a) for a in argv]) for argv in cases]
    json.dump(results, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
