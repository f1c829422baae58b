# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The one local folder of a launch's compile and autotune caches, and the environment naming it."""

from __future__ import annotations

import os

# One local directory for every compile/autotune cache a launch fills, so a launch reuses what
# earlier launches built (FlashInfer's JIT and autotune ~1.5 min uncached). Declared once here:
# the server role's roles/server/templates/environment.j2 reads it through the
# startup_cache_layout filter, so the promoted server finds the sweep's caches warm. SGLang
# 0.5.7-0.5.23 overwrite DG_JIT_CACHE_DIR with SGLANG_DG_CACHE_DIR
# (deep_gemm_wrapper/compile_utils.py), so both are set; from 0.5.15 SGLANG_CACHE_DIR also
# holds FlashInfer's autotune results (runner/flashinfer_autotune.py).
STARTUP_CACHE_LAYOUT = (
    ("XDG_CACHE_HOME", ""),
    ("FLASHINFER_WORKSPACE_BASE", ""),  # FlashInfer appends .cache/flashinfer itself
    ("SGLANG_CACHE_DIR", ""),
    ("TRITON_CACHE_DIR", "triton"),
    ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
    ("CUDA_CACHE_PATH", "nv"),
    ("SGLANG_DG_CACHE_DIR", "deep_gemm"),
    ("DG_JIT_CACHE_DIR", "deep_gemm"),
)


def startup_cache_env(cache_dir: str | None) -> dict[str, str]:
    """The environment that points every start-up cache at `cache_dir` ({} when none)."""
    if not cache_dir:
        return {}
    root = os.path.abspath(os.path.expanduser(cache_dir))
    return {name: os.path.join(root, sub) if sub else root for name, sub in STARTUP_CACHE_LAYOUT}
