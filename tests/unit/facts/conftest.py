"""Fixtures for the facts tests: CUDA libraries built with nvcc, a fake stack venv."""

from __future__ import annotations

import json
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.build_lock import build_lock

from .helpers import ROOT

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
# name -> nvcc -gencode values; one library per target, plus one with several, compressed.
TARGETS = {
    "sm_120a": ["arch=compute_120a,code=sm_120a"],
    "sm_100a": ["arch=compute_100a,code=sm_100a"],
    "sm_90a": ["arch=compute_90a,code=sm_90a"],
    "sm_120": ["arch=compute_120,code=sm_120"],
    "multi": [
        "arch=compute_90a,code=sm_90a",
        "arch=compute_120a,code=sm_120a",
        "arch=compute_120,code=compute_120",
    ],
}


@pytest.fixture(scope="session")
def cuda_libs() -> dict[str, Path]:
    """Shared libraries built by nvcc, cached in build/facts-fatbins by nvcc version."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.fail(
            "nvcc (CUDA 12.8+) is needed to build the test libraries for fatbin detection; not on PATH"
        )
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    tag = version.strip().splitlines()[-1].split()[-1].replace("/", "_")
    out = ROOT / "build" / "facts-fatbins" / tag
    libs = {}
    with build_lock(out / ".lock"):  # another pytest worker may be building them too
        src = out / "k.cu"
        src.write_text(KERNEL)
        for name, gencodes in TARGETS.items():
            lib = out / f"lib_{name}.so"
            if not lib.exists():
                partial = lib.with_name(lib.name + ".partial")  # a killed build leaves no half library
                argv = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-o", str(partial), str(src)]
                for g in gencodes:
                    argv += [f"-gencode={g}"]
                if name == "multi":
                    argv += ["-Xfatbin", "-compress-all"]
                subprocess.run(argv, check=True, capture_output=True)
                partial.replace(lib)
            libs[name] = lib
    return libs


STUB_TORCH = """
__version__ = "2.11.0+cu130"
class version:
    cuda = "13.0"
class _C:
    @staticmethod
    def _cuda_getArchFlags():
        return "sm_90 sm_100 sm_120"
class cuda:
    @staticmethod
    def is_available():
        return False
    @staticmethod
    def device_count():
        return 0
class ops:
    class sgl_kernel:
        cutlass_scaled_fp4_mm = object()
"""

STUB_SGLANG_SERVER_ARGS = """
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", type=str)
        parser.add_argument("--tp-size", "--tp", type=int, default=1)
        parser.add_argument(
            "--moe-runner-backend", choices=["auto", "triton", "flashinfer_cutlass"], default="auto")
        parser.add_argument("--enable-metrics", action="store_true")
"""


def dist_info(site: Path, name: str, version: str, extra: dict[str, str] | None = None) -> None:
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir()
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for fn, text in (extra or {}).items():
        (d / fn).write_text(text)


@pytest.fixture
def fake_stack(tmp_path, cuda_libs) -> dict:
    """A venv whose torch, sgl_kernel, flashinfer and sglang are stubs; sgl_kernel carries
    the nvcc-built libraries for sm_100a and sm_120a."""
    root = tmp_path / "stack"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    site = next((root / "lib").glob("python3*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(STUB_TORCH)
    dist_info(site, "torch", "2.11.0+cu130")
    k = site / "sgl_kernel"
    k.mkdir()
    (k / "__init__.py").write_text("def scaled_fp4_quant(*a):\n    pass\n")
    (k / "sm100").mkdir()
    shutil.copy(cuda_libs["sm_100a"], k / "sm100" / "common_ops.abi3.so")
    shutil.copy(cuda_libs["sm_120a"], k / "common_ops.abi3.so")
    dist_info(site, "sglang-kernel", "0.4.1")
    (site / "flashinfer").mkdir()
    (site / "flashinfer" / "__init__.py").write_text("")
    dist_info(site, "flashinfer-python", "0.7.2")
    for pkg in ("sglang", "sglang/srt"):
        (site / pkg).mkdir()
        (site / pkg / "__init__.py").write_text("")
    (site / "sglang" / "srt" / "server_args.py").write_text(STUB_SGLANG_SERVER_ARGS)
    commit = "0123456789abcdef0123456789abcdef01234567"
    url = json.dumps(
        {"url": "https://github.com/sgl-project/sglang", "vcs_info": {"vcs": "git", "commit_id": commit}}
    )
    dist_info(site, "sglang", "0.5.23", {"direct_url.json": url})
    return {"python": str(root / "bin" / "python"), "site": site, "commit": commit}
