# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""How sgl-kernel is built and how a built wheel is checked, as argv lists and environments.

sgl-kernel builds with scikit-build-core + CMake, without build isolation (against the
stack venv's torch). Its GPU targets come from CMake options, not TORCH_CUDA_ARCH_LIST:
SGL_KERNEL_ENABLE_FP4 adds sm_120a (with CUDA >= 12.8), SGL_KERNEL_ENABLE_SM100A sm_100a.
A wheel is checked by reading the fatbinary headers of the shared libraries inside it
(fatbin.py): a library without sm_120a code would only fail at the first launch on SM120.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile

from ansible_collections.bwtune.sglang.plugins.module_utils import fatbin

# Build option -> CMake cache variable (booleans become ON/OFF).
CMAKE_OPTIONS = {
    "enable_fp4": "SGL_KERNEL_ENABLE_FP4",
    "enable_sm100a": "SGL_KERNEL_ENABLE_SM100A",
    "enable_sm90a": "SGL_KERNEL_ENABLE_SM90A",
    "enable_below_sm90": "ENABLE_BELOW_SM90",
    "enable_ccache": "ENABLE_CCACHE",
    "compile_threads": "SGL_KERNEL_COMPILE_THREADS",
}
DIST_NAMES = ("sglang_kernel", "sgl_kernel")  # wheel file name prefixes, new and old


def cmake_args(options: dict, extra: list[str] | None = None) -> list[str]:
    args = []
    for key, var in CMAKE_OPTIONS.items():
        if key not in options or options[key] is None:
            continue
        value = options[key]
        args.append(f"-D{var}={'ON' if value is True else 'OFF' if value is False else value}")
    return args + list(extra or [])


def required_targets(options: dict, extra: list[str] | None = None) -> list[str]:
    """The sm targets a build with these options must carry."""
    want = ["sm_120a"] if options.get("enable_fp4") else []
    if options.get("enable_sm100a"):
        want.append("sm_100a")
    return sorted(set(want) | set(extra or []))


def build_env(base: dict, jobs: int, args: list[str], nvcc: str | None) -> dict:
    env = dict(base)
    env["MAX_JOBS"] = str(jobs)
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    env["CMAKE_ARGS"] = " ".join(args)
    if nvcc:
        env["CUDACXX"] = nvcc
        bindir = os.path.dirname(nvcc)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def wheel_argv(python: str, source: str, outdir: str) -> list[str]:
    return [
        python,
        "-m",
        "pip",
        "wheel",
        "--no-build-isolation",
        "--no-deps",
        "--no-index",
        "--no-cache-dir",
        "-v",
        "-w",
        outdir,
        source,
    ]


def find_wheels(directory: str) -> list[str]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [
        os.path.join(directory, n)
        for n in names
        if n.endswith(".whl") and n.split("-", 1)[0].lower() in DIST_NAMES
    ]


def wheel_targets(wheel: str) -> dict:
    """fatbin.package_targets of the shared libraries inside a wheel (extracted to a temp dir)."""
    tmp = tempfile.mkdtemp(prefix="bwtune-wheel-")
    try:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                name = info.filename
                if (name.endswith(".so") or ".so." in name) and not name.startswith("/") and ".." not in name:
                    zf.extract(info, tmp)
        return fatbin.package_targets(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def missing_targets(targets: dict, required: list[str]) -> list[str]:
    return [t for t in required if t not in targets["sm"]]


def log_tail(path: str, lines: int = 25) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]
