# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Why an SGLang server did not come up: a failure class read from what its log says.

The log is read as a traceback, not as a list of keywords: the exception that ended the
process (its type and message), the frames it passed through (argument processing in
server_args.py / arg_groups/ / argparse, or distributed init, model and weight loading,
kernels, the scheduler's event loop), and the phrases SGLang, PyTorch, FlashInfer and
Triton print for the failures that matter. In order of precedence:

  oom                   the GPU ran out of memory (PyTorch's and SGLang's own wordings);
  unsupported-hardware  a kernel or backend this GPU cannot run ("no kernel image",
                        "Unsupported architecture", "not supported on Blackwell GPUs",
                        shared memory over the hardware limit, ...);
  crashed               the software stack is broken (an import that fails, an undefined
                        symbol), or the failing traceback ran past argument processing
                        (distributed init, NCCL, model or weight loading, serving);
  invalid-args          argparse refused the command line, the exception was raised
                        while SGLang processed its arguments (server_args.py, arg_groups/),
                        a divisibility check says the parallel sizes do not divide the
                        model (wherever it was raised), or the model path names neither a
                        repo id nor a local folder (HFValidationError);
  startup-timeout       the server is still running and never became healthy.

A traceback cut off before its exception line is read by its frames; one whose innermost
frame is torch's tensor factory (torch/utils/_device.py) died allocating a tensor: oom.
Where a traceback has no frames (a one-line error), a frameless ValueError, AssertionError
or TypeError counts as argument processing unless the log shows that stage had finished
(SGLang prints `server_args=ServerArgs(...)` and the model-loading lines only after it).
Standard library only; docs/failure-classes.md lists the phrases with the logs they come
from (tests/fixtures/failure_logs/).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts.results_contract import (
    CRASHED,
    INVALID_ARGS,
    OOM,
    STARTUP_TIMEOUT,
    UNSUPPORTED_HARDWARE,
)

MESSAGE_MAX = 300

# Prefixes a log line picks up on its way into an issue thread or a log collector: markdown
# quotes, collector timestamps, docker-compose service names, Ray actor tags. Stripped so
# that "File ..." frames and exception lines are recognised wherever they were printed.
_PREFIXES = re.compile(
    r"^(?:"
    r">\s?"
    r"|\[\d{4}-\d\d-\d\dT[\d:.]+Z?\]\s*"
    r"|\d{4}-\d\d-\d\dT[\d:.]+(?:[+-]\d\d:\d\d|Z)?\s+(?:stdout|stderr)\s+[FP]\s"
    r"|[\w.-]+\s+\|\s"
    r"|\([\w.-]+ pid=\d+(?:, ip=[\d.]+)?\)\s?"
    r")"
)
_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+(?:, in (\S+))?')
# An exception line: a (dotted) exception class name, then ": message" or nothing.
# "Error: tvm.error.InternalError: ..." (a wrapper's prefix) is read from the inner name.
_EXCEPTION = re.compile(
    r"^(?:Error:\s+)?((?:[A-Za-z_]\w*\.)*"
    r"(?:[A-Z]\w*(?:Error|Exception|Exit|OutOfResources|Interrupt)|Exception))"
    r"(?::\s?(.*)|\s*)$"
)

# -- the phrases, each with the logs it was read from (docs/failure-classes.md)

_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation"
    r"|Not enough memory\. Please try to increase --mem-fraction-static"
    r"|Not enough memory to allocate KV cache|out of memory \(OOM\)|CUBLAS_STATUS_ALLOC_FAILED"
    r"|leave no GPU memory for the KV cache"
    # Accelerators' own allocators (Ascend torch_npu, ROCm HIP, the CUDA driver) and
    # SGLang's KV-pool allocator ("Decode out of memory. Try to lower your batch size.").
    r"|\b(?:NPU|HIP|XPU) out of memory|hipErrorOutOfMemory|CUDA driver error: out of memory"
    r"|\b(?:Decode|Prefill|Extend) out of memory"
    # Memory exhaustion reported indirectly: the KV-cache token budget profiled after the
    # weights were loaded is negative ("... larger than the profiled value -561981").
    r"|profiled value -\d+|max_total_num_tokens=-\d+",
    re.I,
)
_HARDWARE = re.compile(
    r"no kernel image is available|cudaErrorNoKernelImageForDevice"
    r"|unsupported (?:gpu )?architecture"
    r"|not (?:supported|available) (?:on|for) (?:the current |this |your )?"
    r"(?:Blackwell|Hopper|Ampere|Ada|Turing|Volta|GPUs?|devices?|architectures?|platform"
    r"|SM ?\d+|sm_?\d+|compute capability)"
    r"|\bonly\b[^.]*\bsupported (?:on|for)\b[^.]*"
    r"(?:Blackwell|Hopper|Ampere|GPUs?|devices?|architectures?|SM ?\d+|sm_?\d+)"
    r"|\bOnly SM ?[\d.x]+|\bonly supports? (?:SM|sm_?|compute capability) ?[\d.]+"
    r"|(?:does not|doesn't|do not|cannot) (?:support|run)\b[^.]*\b(?:capability|SM ?\d+|sm_?\d+)"
    r"|\bSM ?1\d{2}[ -]only|\bsm_?1\d{2}[ -]only"
    r"|requires? (?:an? )?(?:SM ?\d+|sm_?\d+|compute capability|Hopper|Blackwell)"
    r"|Minimum capability: ?\d+|Min capability: ?\d+"
    r"|unsupported (?:GPU|compute capability|SM)\b"
    r"|out of resource: shared memory"
    r"|builds? them for SM ?\d+"
    # The JIT toolchain refuses this GPU's architecture: ptxas/nvcc (through Triton,
    # FlashInfer's JIT or sgl-kernel), CUTLASS's arch-conditional instructions, Triton's
    # fp8 types, and a kernel launch with no code for this device.
    r"|ptxas fatal\s*:\s*Value '(?:sm|compute)_\w+' is not defined"
    r"|nvcc fatal\s*:\s*Unsupported gpu architecture"
    r"|error\s*:\s*Feature '[^']+' (?:not supported on|requires) \.t"
    r"|Arch conditional MMA instruction used without targeting appropriate compute capability"
    r"|(?:CUDA|HIP) error: invalid device function|hipErrorInvalidDeviceFunction"
    r"|hipErrorNoBinaryForGpu|not supported (?:on|in) (?:CUDA arch|this architecture)",
    re.I,
)
# The checkpoint's model architecture is not implemented by the installed SGLang: no flag
# makes it start (crashed), and "Unsupported architectures: XForCausalLM" is no GPU refusal.
_UNSUPPORTED_MODEL = re.compile(
    r"Model architectures? \[[^]]*\] (?:are|is) not supported|Unsupported architectures?: \w+For\w+"
)
# Triton's per-architecture code generation (make_ttgir/make_llir/make_ptx/make_cubin): an
# exception raised there means this GPU's target could not be compiled for.
_OUT_OF_RESOURCES = re.compile(r"^(?:[A-Za-z_]\w*\.)*OutOfResources(?::|$)")
_TRITON_CODEGEN_FRAME = re.compile(r"(?:/|^)triton/backends/(?:nvidia|amd)/compiler\.py")
# The software stack itself is broken: no config of it can start.
_BROKEN_STACK = re.compile(
    r"undefined symbol|cannot open shared object file|Could not load any common_ops library"
    r"|No module named|GLIBC\w* not found|version `[^']+' not found",
    re.I,
)
# argparse's own refusal (exit status 2) and its usage banner.
_ARGPARSE = re.compile(
    r"(?:^|\s)error: (?:argument |unrecognized arguments|the following arguments are required"
    r"|ambiguous option|one of the arguments)"
    r"|^usage: (?:launch_server\.py|sglang|python3? -m sglang)"
)
# Frames of argument processing: SGLang's ServerArgs, its argument groups, argparse, and
# ModelConfig, which checks the flags against the checkpoint (--quantization, --context-length).
_ARG_FRAME = re.compile(
    r"(?:/|^)(?:sglang/srt/server_args\.py|sglang/srt/server_args_config_parser\.py"
    r"|sglang/srt/arg_groups/|sglang/srt/configs/model_config\.py|argparse\.py)"
)
_LAUNCH_FRAME = re.compile(r"(?:/|^)sglang/launch_server\.py")
# Frames that only run once the arguments were accepted.
_RUNTIME_FRAME = re.compile(
    r"(?:/|^)(?:sglang/srt/(?:distributed|model_executor|model_loader|models|layers|managers"
    r"|speculative|mem_cache|disaggregation|entrypoints/http_server|entrypoints/engine"
    r"|entrypoints/openai)|torch/distributed|torch/cuda|flashinfer|triton/|deep_gemm"
    r"|sgl_kernel|vllm/)"
)
# Log lines SGLang prints only after argument processing succeeded.
_PAST_ARGUMENTS = re.compile(
    r"server_args=ServerArgs\(|Init torch distributed|Load weight begin|Loading safetensors"
    r"|Scheduler hit an exception|Capture cuda graph|KV Cache is allocated|Memory pool end"
    r"|Loading weights|Multi-thread loading shards|Received sigquit from a child process"
    r"|Capturing batches|Initialization failed\. warmup error"
)
# The parallel layout does not divide the model: SGLang's ensure_divisibility
# (sglang/srt/distributed/utils.py, `assert numerator % denominator == 0, "{} is not divisible
# by {}"`) and the FP8 block checks ("... is not divisible by weight quantization block_n")
# fail wherever the model is built, past argument processing, but what is wrong is
# --tp/--ep/--dp for this checkpoint: an argument error. Read from the exception line (or
# the assertion's source line, or the ensure_divisibility frame, when the quote is cut).
_NOT_DIVISIBLE = re.compile(r"\bis not divisible by\b", re.I)
_DIVISIBILITY_CHECK = re.compile(
    r"^assert numerator % denominator == 0|^File \"[^\"]+\", line \d+, in ensure_divisibility$"
)
# The value of --model-path / --tokenizer-path (or --revision) cannot name a Hugging Face repo:
# huggingface_hub's validate_repo_id raises HFValidationError for a malformed id, and
# transformers reaches it for a local path that does not exist. Whatever frames it was raised
# through (transformers' hub code, no SGLang frame), what is wrong is the flag's value.
_FLAG_VALUE_EXCEPTIONS = ("HFValidationError",)
# A traceback cut off (no exception line) whose innermost frame is torch's tensor factory
# dispatch under a device context (torch/utils/_device.py, __torch_function__: every
# torch.empty/zeros/... while a model is built on the GPU goes through it): the process died
# allocating a tensor, i.e. the device ran out of memory. Only read from a cut traceback: an
# exception line, when there is one, decides.
_ALLOCATION_FRAME = re.compile(r"(?:/|^)torch/utils/_device\.py$")
# Exception types that SGLang's argument checks raise (assert, raise ValueError, ...).
_ARG_EXCEPTIONS = ("ValueError", "AssertionError", "TypeError", "ArgumentError", "ArgumentTypeError")


@dataclass
class Failure:
    """A classified failure: the class, the log line that shows it, and the evidence."""

    failure_class: str
    message: str
    evidence: list[str] = field(default_factory=list)

    def as_tuple(self) -> tuple[str, str]:
        return self.failure_class, self.message


@dataclass
class _Exception:
    name: str  # the class name, without its module ("OutOfMemoryError")
    line: str  # the exception line as printed (prefixes stripped)
    frames: list[str]  # file paths of the traceback that raised it, outermost first


def _clean(line: str) -> str:
    s = line.rstrip("\n")
    for _attempt in range(3):  # nested prefixes: "> [ts] (Actor pid=1) ..."
        stripped = _PREFIXES.sub("", s, count=1)
        if stripped == s:
            break
        s = stripped
    return s.strip()


def _exceptions(lines: Sequence[str]) -> list[_Exception]:
    """Every exception line, each with the frames printed since the previous one."""
    found: list[_Exception] = []
    frames: list[str] = []
    for s in lines:
        m = _FRAME.match(s)
        if m:
            frames.append(m.group(1))
            continue
        if s.startswith("Traceback (most recent call last)") or "hit an exception: Traceback" in s:
            frames = []
            continue
        e = _EXCEPTION.match(s)
        if e:
            found.append(_Exception(e.group(1).rsplit(".", 1)[-1], s, frames))
            frames = []
    # A traceback cut off before its exception line (logs copied partially, a killed
    # process): its frames still say where it was.
    if frames:
        found.append(_Exception("", "", frames))
    return found


def _short(line: str) -> str:
    return line.strip()[:MESSAGE_MAX]


def _phase(frames: Sequence[str]) -> str | None:
    """invalid-args when the exception was raised by argument processing, crashed when the
    traceback reached code that runs only after the arguments were accepted, None when the
    frames say neither. The innermost SGLang frame is where SGLang raised it (an exception
    from torch or FlashInfer is judged by the SGLang code that called them)."""
    if not frames:
        return None
    own = [f for f in frames if "sglang/" in f or _ARG_FRAME.search(f)]
    innermost = own[-1] if own else frames[-1]
    if _ARG_FRAME.search(innermost):
        return INVALID_ARGS
    if any(_RUNTIME_FRAME.search(f) for f in frames):
        return CRASHED
    if any(_LAUNCH_FRAME.search(f) for f in frames):
        return INVALID_ARGS
    return None


def _first_match(pattern: re.Pattern[str], lines: Sequence[str], skip: re.Pattern[str]) -> str | None:
    for s in reversed(lines):
        if pattern.search(s) and not skip.search(s):
            return s
    return None


# SGLang's advice after a failed graph capture names memory flags whatever the cause was;
# it is advice, not evidence of an OOM.
_ADVICE = re.compile(r"^\d+\.\s|^Possible solutions|set --mem-fraction-static to a smaller value")
_NOTHING = re.compile(r"(?!x)x")
_MODEL_OR_ADVICE = re.compile(_ADVICE.pattern + "|" + _UNSUPPORTED_MODEL.pattern)
# SGLang logs optional model modules it could not import and goes on: not a broken stack.
_IGNORED_IMPORT = re.compile(r"Ignore import error")
_ERRORISH = re.compile(r"error|exception|fail|abort|killed", re.I)


def classify(lines: Sequence[str], *, exited: bool, returncode: int | None) -> Failure:
    """Classify a server that did not become healthy from its log tail (see the module doc)."""
    clean = [_clean(raw) for raw in lines]
    clean = [s for s in clean if s]
    excs = _exceptions(clean)

    oom = _first_match(_OOM, clean, _ADVICE)
    if oom is not None:
        return Failure(OOM, _short(oom), ["out-of-memory phrase"])
    model = _first_match(_UNSUPPORTED_MODEL, clean, _NOTHING)
    hardware = _first_match(_HARDWARE, clean, _ADVICE if model is None else _MODEL_OR_ADVICE)
    if hardware is not None:
        return Failure(UNSUPPORTED_HARDWARE, _short(hardware), ["unsupported-hardware phrase"])
    # Triton's OutOfResources: the kernel needs more shared memory or registers than this GPU
    # has, whatever the (possibly cut) message says.
    resources = _first_match(_OUT_OF_RESOURCES, clean, _NOTHING)
    if resources is not None:
        return Failure(UNSUPPORTED_HARDWARE, _short(resources), ["Triton: out of a hardware resource"])
    codegen = next(
        (e for e in reversed(excs) if e.frames and _TRITON_CODEGEN_FRAME.search(e.frames[-1])), None
    )
    if codegen is not None:
        shown = codegen.line or f"traceback through {codegen.frames[-1]}"
        return Failure(
            UNSUPPORTED_HARDWARE, _short(shown), ["raised by Triton's code generation for this GPU"]
        )
    if not exited:
        return Failure(STARTUP_TIMEOUT, _last_line(clean), ["still running"])
    if model is not None:
        return Failure(CRASHED, _short(model), ["model architecture not implemented by this SGLang"])

    broken = _first_match(_BROKEN_STACK, clean, _IGNORED_IMPORT)
    if broken is not None:
        return Failure(CRASHED, _short(broken), ["broken software stack"])
    divisibility = next(
        (e.line for e in reversed(excs) if e.name in _ARG_EXCEPTIONS and _NOT_DIVISIBLE.search(e.line)),
        None,
    ) or _first_match(_DIVISIBILITY_CHECK, clean, _NOTHING)
    if divisibility is not None:
        return Failure(INVALID_ARGS, _short(divisibility), ["the parallel sizes do not divide the model"])
    flag_value = next((e.line for e in reversed(excs) if e.name in _FLAG_VALUE_EXCEPTIONS), None)
    if flag_value is not None:
        return Failure(
            INVALID_ARGS, _short(flag_value), ["the model path is not a repo id or a local folder"]
        )
    argparse_line = _first_match(_ARGPARSE, clean, _NOTHING)
    if argparse_line is not None:
        # argparse prints usage, then "error: ..." last: report the error line if present.
        error_line = _first_match(re.compile(r"(?:^|\s)error: "), clean, _NOTHING)
        return Failure(INVALID_ARGS, _short(error_line or argparse_line), ["argparse refused the argv"])

    # The exception that ended the process: the last one that has a message or frames.
    named = [e.line for e in excs if e.name]
    if excs and not excs[-1].name and _ALLOCATION_FRAME.search(excs[-1].frames[-1]):
        return Failure(
            OOM,
            f"traceback cut inside a tensor allocation ({excs[-1].frames[-1]})",
            ["died allocating a tensor"],
        )
    for exc in reversed(excs):
        phase = _phase(exc.frames)
        if phase is not None:
            why = (
                "raised in argument processing"
                if phase == INVALID_ARGS
                else "raised past argument processing"
            )
            # A traceback cut off before its exception line: name the last exception seen.
            shown = exc.line or (named[-1] if named else f"traceback through {exc.frames[-1]}")
            return Failure(phase, _short(shown), [why])
    if excs and excs[-1].name:
        last = excs[-1]
        past = any(_PAST_ARGUMENTS.search(s) for s in clean)
        if last.name in _ARG_EXCEPTIONS and not past:
            return Failure(INVALID_ARGS, _short(last.line), ["argument-check exception, no later stage"])
        return Failure(CRASHED, f"exit status {returncode}: {_short(last.line)}", ["exception"])
    if returncode == 2 and not any(_PAST_ARGUMENTS.search(s) for s in clean):
        return Failure(INVALID_ARGS, _last_line(clean) or "exit status 2 (argparse)", ["exit status 2"])
    shown = _first_match(_ERRORISH, clean, _NOTHING) or _last_line(clean)
    return Failure(CRASHED, f"exit status {returncode}" + (f": {_short(shown)}" if shown else ""), [])


def _last_line(lines: Sequence[str]) -> str:
    for s in reversed(lines):
        if s.strip():
            return _short(s)
    return ""


def classify_failure(lines: Sequence[str], *, exited: bool, returncode: int | None) -> tuple[str, str]:
    """(failure class, the log line that shows it): the sweep's and the server role's call."""
    return classify(lines, exited=exited, returncode=returncode).as_tuple()
