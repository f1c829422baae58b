"""Performance profiles: what the simulated GPU is and how fast each config runs on it.

A profile is a YAML file (schema in docs/standin.md). Shipped profiles live in
`profiles/`; `BWTUNE_STANDIN_PROFILE` names one of them or a path to a YAML file.
Every number in a shipped profile carries a `source` saying where it came from.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROFILE_ENV = "BWTUNE_STANDIN_PROFILE"
DEFAULT_PROFILE = "rtx-pro-6000x8-qwen35-397b-nvfp4"
PROFILES_DIR = Path(__file__).resolve().parent / "profiles"


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the file and the bad value."""


@dataclass(frozen=True)
class GpuSpec:
    name: str
    arch: str  # the planner's GPU name, e.g. "sm120"
    compute_capability: str
    count: int
    memory_mib: int
    driver_version: str
    cuda_version: str
    power_limit_w: int


@dataclass(frozen=True)
class Match:
    """Flag conditions; all must hold. Values: scalar (equal), list (any of), None (unset),
    or a string with a comparison operator (">=0.9")."""

    conditions: dict[str, Any]

    def matches(self, flags: dict[str, Any]) -> bool:
        return all(_condition_holds(flags.get(k), want) for k, want in self.conditions.items())


@dataclass(frozen=True)
class Adjustment:
    match: Match
    step_factor: float
    prefill_factor: float
    why: str


@dataclass(frozen=True)
class FaultRule:
    match: Match
    fault: str
    why: str


@dataclass(frozen=True)
class Speculative:
    base_step_factor: float  # verify pass + bookkeeping, relative to a plain decode step
    per_draft_step_factor: float  # each draft step (the MTP layer) adds this much
    accept_length: dict[int, float]  # tokens per verify step (bonus token included) -> probability
    source: str
    # Draft compute that grows with the running batch: a verify step scores every running
    # request's draft tokens; past the first request's, (batch - 1) x (draft tokens - 1) of
    # them, those above verify_knee_tokens (while the pass stays memory-bound they are nearly
    # free) cost this many ms each. 0: none.
    draft_cost_ms_per_token: float = 0.0
    verify_knee_tokens: float = 0.0
    # The accept rate falls with the batch: the accepted draft tokens (past the bonus token)
    # are scaled by H / (H + batch - 1), H this value (they halve at batch H + 1). None: flat.
    accept_halving_batch: float | None = None

    def step_factor(self, num_steps: int) -> float:
        return self.base_step_factor + self.per_draft_step_factor * num_steps

    def distribution(self, max_tokens: int, batch: int = 1) -> list[tuple[int, float]]:
        """The accept-length distribution capped at `max_tokens` (the draft tokens + 1 bonus):
        probability above the cap collapses onto the cap. At a running batch past 1 each
        length above 1 keeps accept_scale(batch) of its probability; the rest goes to 1."""
        capped: dict[int, float] = {}
        for length, p in self.accept_length.items():
            key = max(1, min(length, max_tokens))
            capped[key] = capped.get(key, 0.0) + p
        total = sum(capped.values())
        scale = self.accept_scale(batch)
        out = {k: capped[k] / total * (scale if k > 1 else 1.0) for k in capped}
        out[1] = out.get(1, 0.0) + (1.0 - sum(out.values()))
        return [(k, out[k]) for k in sorted(out)]

    def mean_accept_length(self, max_tokens: int, batch: int = 1) -> float:
        return sum(k * p for k, p in self.distribution(max_tokens, batch))

    def accept_scale(self, batch: int) -> float:
        """What share of the accepted draft tokens is left at this running batch (1 at batch 1)."""
        if self.accept_halving_batch is None or batch <= 1:
            return 1.0
        return self.accept_halving_batch / (self.accept_halving_batch + batch - 1)


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    description: str
    sglang_version: str
    gpu: GpuSpec
    weight_load_s: float
    graph_capture_s: float
    weights_mib_per_gpu: int
    cv: float
    step_jitter_cv: float
    prefill_tokens_per_s: float
    prefill_overhead_ms: float
    step_ms: list[tuple[int, float]]  # (running batch size, decode step ms), ascending
    baseline: str
    adjustments: list[Adjustment]
    speculative: Speculative
    default_max_running_requests: int
    context_length: int
    faults: list[FaultRule] = field(default_factory=list)
    # What warm start-up caches leave of each phase (startup_cache.py); 1.0: they save nothing.
    cached_capture_fraction: float = 1.0
    page_cache_load_fraction: float = 1.0

    def decode_step_ms(self, batch: int) -> float:
        """Baseline decode step time at a running batch size (linear between the profile's
        points, extrapolated along the last segment)."""
        sizes = [b for b, _ in self.step_ms]
        if batch <= sizes[0]:
            return self.step_ms[0][1]
        i = bisect.bisect_left(sizes, batch)
        if i < len(sizes) and sizes[i] == batch:
            return self.step_ms[i][1]
        lo, hi = (i - 1, i) if i < len(sizes) else (len(sizes) - 2, len(sizes) - 1)
        (b0, t0), (b1, t1) = self.step_ms[lo], self.step_ms[hi]
        return t0 + (t1 - t0) * (batch - b0) / (b1 - b0)


def _condition_holds(value: Any, want: Any) -> bool:
    if isinstance(want, list):
        return any(_condition_holds(value, w) for w in want)
    if want is None:
        return value is None or value is False
    if isinstance(want, str):
        for op in (">=", "<=", ">", "<", "!="):
            if want.startswith(op):
                return _compare(value, op, want[len(op) :].strip())
    if isinstance(want, bool):
        return bool(value) is want
    if value is None:
        return False
    return str(value).casefold() == str(want).casefold()


def _compare(value: Any, op: str, operand: str) -> bool:
    if op == "!=":
        return value is None or str(value).casefold() != operand.casefold()
    try:
        left, right = float(value), float(operand)
    except (TypeError, ValueError):
        return False
    return {">=": left >= right, "<=": left <= right, ">": left > right, "<": left < right}[op]


def resolve_profile_path(name_or_path: str | None = None) -> Path:
    """A shipped profile's name, or a path to a YAML file; default from the environment."""
    chosen = name_or_path or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
    shipped = PROFILES_DIR / f"{chosen}.yml"
    if shipped.is_file():
        return shipped
    candidate = Path(chosen).expanduser()
    if candidate.is_file():
        return candidate
    names = ", ".join(sorted(shipped_profiles()))
    raise ProfileError(f"{PROFILE_ENV}={chosen!r}: no such shipped profile or file (shipped: {names})")


def shipped_profiles() -> list[str]:
    return [p.stem for p in PROFILES_DIR.glob("*.yml")]


def load_profile(name_or_path: str | None = None) -> Profile:
    path = resolve_profile_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ProfileError(f"{path}: cannot read profile: {exc}") from exc
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a profile is a mapping, got {type(data).__name__}")
    return with_stack(_parse(path, data))


# The stack's own speed (issue 28, bisection tests; docs/standin.md): off unless set. A
# directory on which `sglang` is importable (a stack's site-packages); its file
# sglang/bwtune_standin.json may say {"decode_step_factor": x, "launch_cv": y}.
STACK_ENV = "BWTUNE_STANDIN_STACK"
STACK_FILE = os.path.join("sglang", "bwtune_standin.json")


def with_stack(profile: Profile) -> Profile:
    """The profile as the stack under BWTUNE_STANDIN_STACK runs it: decode steps x the
    stack file's decode_step_factor, the launch-to-launch spread its launch_cv."""
    import dataclasses
    import json

    root = os.environ.get(STACK_ENV)
    if not root:
        return profile
    path = Path(root) / STACK_FILE
    if not path.is_file():  # a stack that says nothing: the profile's own speed
        return profile
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{STACK_ENV}={root!r}: {path}: {exc}") from exc
    if not isinstance(raw, dict) or set(raw) - {"decode_step_factor", "launch_cv"}:
        raise ProfileError(f"{STACK_ENV}={root!r}: {path}: keys decode_step_factor, launch_cv only")
    factor, cv = raw.get("decode_step_factor", 1.0), raw.get("launch_cv", profile.cv)
    for key, value in (("decode_step_factor", factor), ("launch_cv", cv)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 100:
            raise ProfileError(f"{STACK_ENV}={root!r}: {path}: {key} {value!r} is not a number in [0, 100)")
    if factor <= 0:
        raise ProfileError(f"{STACK_ENV}={root!r}: {path}: decode_step_factor {factor!r} must be > 0")
    return dataclasses.replace(
        profile,
        step_ms=[(batch, ms * factor) for batch, ms in profile.step_ms],
        cv=float(cv),
        baseline=f"{profile.baseline}; stack {root}: decode step x{factor:g}, launch cv {cv:g}",
    )


class _Reader:
    """Typed access to the profile mapping; errors name the file and the dotted key."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path, self.data = path, data

    def get(self, dotted: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                if default is not ...:
                    return default
                raise ProfileError(f"{self.path}: missing key {dotted}")
            node = node[part]
        if kind is float and isinstance(node, int) and not isinstance(node, bool):
            node = float(node)
        if not isinstance(node, kind) or (isinstance(node, bool) and kind in (int, float)):
            raise ProfileError(f"{self.path}: {dotted} = {node!r} is not {_kind_name(kind)}")
        return node

    def positive(self, dotted: str, default: Any = ...) -> float:
        value = self.get(dotted, float, default)
        if value <= 0:
            raise ProfileError(f"{self.path}: {dotted} = {value!r} must be > 0")
        return float(value)

    def share(self, dotted: str, default: Any = ...) -> float:
        """A part of a whole: 0 (nothing left) to 1 (all of it)."""
        value = self.get(dotted, float, default)
        if not 0 <= value <= 1:
            raise ProfileError(f"{self.path}: {dotted} = {value!r} must be in [0, 1]")
        return float(value)

    def fraction(self, dotted: str, default: Any = ...) -> float:
        value = self.get(dotted, float, default)
        if not 0 <= value < 1:
            raise ProfileError(f"{self.path}: {dotted} = {value!r} must be in [0, 1)")
        return float(value)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(kind, f"a {kind.__name__}")


def _match(r: _Reader, where: str, raw: Any) -> Match:
    if not isinstance(raw, dict) or not raw:
        raise ProfileError(f"{r.path}: {where}.match must be a non-empty mapping of flag -> value")
    return Match({str(k).lstrip("-"): v for k, v in raw.items()})


def _parse(path: Path, data: dict[str, Any]) -> Profile:
    r = _Reader(path, data)
    gpu = GpuSpec(
        name=r.get("gpu.name", str),
        arch=r.get("gpu.arch", str),
        compute_capability=str(r.get("gpu.compute_capability", (str, float))),
        count=int(r.positive("gpu.count")),
        memory_mib=int(r.positive("gpu.memory_mib")),
        driver_version=str(r.get("gpu.driver_version", (str, int, float))),
        cuda_version=str(r.get("gpu.cuda_version", (str, float))),
        power_limit_w=int(r.positive("gpu.power_limit_w", 600)),
    )
    raw_steps = r.get("decode.baseline.step_ms", dict)
    try:
        steps = sorted((int(b), float(t)) for b, t in raw_steps.items())
    except (TypeError, ValueError) as exc:
        raise ProfileError(f"{path}: decode.baseline.step_ms must map batch size -> ms: {exc}") from exc
    if len(steps) < 2 or any(b < 1 or t <= 0 for b, t in steps):
        raise ProfileError(f"{path}: decode.baseline.step_ms needs >= 2 points with batch >= 1 and ms > 0")
    adjustments = []
    for i, raw in enumerate(r.get("decode.adjustments", list, [])):
        where = f"decode.adjustments[{i}]"
        if not isinstance(raw, dict):
            raise ProfileError(f"{path}: {where} must be a mapping")
        sub = _Reader(path, raw)
        adjustments.append(
            Adjustment(
                match=_match(r, where, raw.get("match")),
                step_factor=sub.positive("step_factor", 1.0),
                prefill_factor=sub.positive("prefill_factor", 1.0),
                why=sub.get("why", str),
            )
        )
    accept_raw = r.get("speculative.accept_length", dict)
    try:
        accept = {int(k): float(v) for k, v in accept_raw.items()}
    except (TypeError, ValueError) as exc:
        raise ProfileError(f"{path}: speculative.accept_length must map tokens -> probability") from exc
    if not accept or any(k < 1 or p < 0 for k, p in accept.items()) or sum(accept.values()) <= 0:
        raise ProfileError(f"{path}: speculative.accept_length needs tokens >= 1 and probabilities >= 0")
    speculative = Speculative(
        base_step_factor=r.positive("speculative.base_step_factor"),
        per_draft_step_factor=float(r.get("speculative.per_draft_step_factor", float)),
        accept_length=accept,
        source=r.get("speculative.source", str),
        draft_cost_ms_per_token=float(r.get("speculative.draft_cost_ms_per_token", float, 0.0)),
        verify_knee_tokens=float(r.get("speculative.verify_knee_tokens", float, 0.0)),
        accept_halving_batch=(
            r.positive("speculative.accept_halving_batch")
            if r.get("speculative.accept_halving_batch", (int, float), None) is not None
            else None
        ),
    )
    for key in ("draft_cost_ms_per_token", "verify_knee_tokens"):
        if getattr(speculative, key) < 0:
            raise ProfileError(f"{path}: speculative.{key} = {getattr(speculative, key)!r} must be >= 0")
    faults = []
    for i, raw in enumerate(r.get("faults", list, [])):
        where = f"faults[{i}]"
        if not isinstance(raw, dict):
            raise ProfileError(f"{path}: {where} must be a mapping")
        sub = _Reader(path, raw)
        faults.append(
            FaultRule(_match(r, where, raw.get("match")), sub.get("fault", str), sub.get("why", str))
        )
    return Profile(
        name=r.get("name", str),
        path=path,
        description=r.get("description", str, ""),
        sglang_version=str(r.get("sglang_version", str)),
        gpu=gpu,
        weight_load_s=float(r.get("startup.weight_load_s", float)),
        graph_capture_s=float(r.get("startup.graph_capture_s", float)),
        weights_mib_per_gpu=int(r.positive("memory.weights_mib_per_gpu")),
        cv=r.fraction("noise.cv"),
        step_jitter_cv=r.fraction("noise.step_jitter_cv", 0.0),
        prefill_tokens_per_s=r.positive("prefill.tokens_per_s"),
        prefill_overhead_ms=float(r.get("prefill.overhead_ms", float, 0.0)),
        step_ms=steps,
        baseline=r.get("decode.baseline.describes", str),
        adjustments=adjustments,
        speculative=speculative,
        default_max_running_requests=int(r.positive("serving.max_running_requests")),
        context_length=int(r.positive("serving.context_length")),
        faults=faults,
        cached_capture_fraction=r.share("startup.cached_capture_fraction", 1.0),
        page_cache_load_fraction=r.share("startup.page_cache_load_fraction", 1.0),
    )
