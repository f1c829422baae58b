"""What warm start-up caches save a launch (SIMULATED; docs/standin.md, "Warm caches").

Real SGLang JIT-compiles and autotunes its kernels while it starts (FlashInfer's autotune is
~1.5 min uncached) and reads the checkpoint from disk unless the host's page cache still holds
it. A sweep points every launch at one cache directory (FLASHINFER_WORKSPACE_BASE and its
siblings, module_utils/_contracts/startup_caches.py). The stand-in keeps marker files in that directory, under
`bwtune-standin/`, and shortens its simulated start-up by the profile's fractions:

- kernels: after a successful graph capture, one marker per kernel family the config used
  (`<arch>/<flag>=<value>` for the MoE runner, FP4 GEMM and attention backends, and
  speculative on/off, as SGLang resolved them). A launch whose every marker is present
  captures in `startup.cached_capture_fraction` of `graph_capture_s`.
- weights: after the weights are loaded, a marker keyed by the checkpoint's path that holds
  this host's boot id. A launch of the same checkpoint in the same boot loads in
  `startup.page_cache_load_fraction` of `weight_load_s`. The real page cache is host-wide; the
  stand-in keeps the marker in the launch's cache directory instead, so that a test or a
  demo that starts with a fresh directory starts cold whatever ran on the host before it.

Without a cache directory in its environment a launch is always cold and writes nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bwtune.standin.profile import Profile

CACHE_ENV = "FLASHINFER_WORKSPACE_BASE"
MARKER_DIR = "bwtune-standin"
KERNEL_FLAGS = ("moe-runner-backend", "fp4-gemm-backend", "attention-backend")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=+-]")


@dataclass(frozen=True)
class StartupPlan:
    """A launch's simulated start-up, in profile seconds (before the start-up scale)."""

    weight_load_s: float
    capture_s: float
    weights_cached: bool
    kernels_cached: bool
    kernels: tuple[str, ...]
    markers: Path | None  # where the markers are (None: no cache directory, always cold)
    weights_marker: Path | None

    def describe(self, profile: Profile) -> list[str]:
        """The log lines that say what the caches saved (or why they did not)."""
        if self.markers is None:
            return [f"[simulated] no start-up cache ({CACHE_ENV} unset): cold start"]
        weights = (
            f"checkpoint in the page cache: load {self.weight_load_s:.1f} s of {profile.weight_load_s:.1f} s "
            f"(startup.page_cache_load_fraction {profile.page_cache_load_fraction:g})"
            if self.weights_cached
            else f"checkpoint not in the page cache: load {self.weight_load_s:.1f} s"
        )
        kernels = (
            f"kernels cached ({', '.join(self.kernels)}): capture {self.capture_s:.1f} s of "
            f"{profile.graph_capture_s:.1f} s (startup.cached_capture_fraction "
            f"{profile.cached_capture_fraction:g})"
            if self.kernels_cached
            else f"kernels not all cached ({', '.join(self.kernels)}): capture {self.capture_s:.1f} s"
        )
        return [f"[simulated] start-up cache {self.markers.parent}: {weights}; {kernels}"]


def kernel_keys(resolved: Mapping[str, Any]) -> tuple[str, ...]:
    """The kernel families a config runs, one `flag=value` per backend it resolves to."""
    keys = [f"{flag}={resolved.get(flag) or 'auto'}" for flag in KERNEL_FLAGS]
    keys.append(f"speculative={'on' if resolved.get('speculative-algorithm') else 'off'}")
    return tuple(_UNSAFE.sub("_", str(k)) for k in keys)


def boot_id() -> str:
    """This boot of the host: the page cache does not outlive it."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def plan(
    profile: Profile, resolved: Mapping[str, Any], model_path: str, env: Mapping[str, str]
) -> StartupPlan:
    """How long this launch's weight load and graph capture take, given the markers there."""
    kernels = kernel_keys(resolved)
    base = env.get(CACHE_ENV)
    if not base:
        return StartupPlan(profile.weight_load_s, profile.graph_capture_s, False, False, kernels, None, None)
    markers = Path(base) / MARKER_DIR
    key = hashlib.sha256(os.path.realpath(model_path).encode()).hexdigest()[:16]
    weights_marker = markers / "page-cache" / key
    try:
        weights_cached = weights_marker.read_text(encoding="ascii").strip() == boot_id()
    except OSError:
        weights_cached = False
    kernels_cached = all((markers / "kernels" / profile.gpu.arch / k).is_file() for k in kernels)
    return StartupPlan(
        weight_load_s=profile.weight_load_s * (profile.page_cache_load_fraction if weights_cached else 1.0),
        capture_s=profile.graph_capture_s * (profile.cached_capture_fraction if kernels_cached else 1.0),
        weights_cached=weights_cached,
        kernels_cached=kernels_cached,
        kernels=kernels,
        markers=markers,
        weights_marker=weights_marker,
    )


def remember_weights(the_plan: StartupPlan) -> str | None:
    """Mark the checkpoint as read in this boot; an error message, or None."""
    if the_plan.weights_marker is None:
        return None
    try:
        the_plan.weights_marker.parent.mkdir(parents=True, exist_ok=True)
        the_plan.weights_marker.write_text(boot_id() + "\n", encoding="ascii")
    except OSError as exc:
        return f"cannot write {the_plan.weights_marker}: {exc.strerror}"
    return None


def remember_kernels(the_plan: StartupPlan, arch: str) -> str | None:
    """Mark the config's kernels as compiled and tuned; an error message, or None."""
    if the_plan.markers is None:
        return None
    folder = the_plan.markers / "kernels" / arch
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for key in the_plan.kernels:
            (folder / key).touch()
    except OSError as exc:
        return f"cannot write {folder}: {exc.strerror}"
    return None
