#!/usr/bin/env python3
"""Everything a provisioning test needs on this machine, made once per directory.

    scenario.py DIR        -> DIR/vars.yml (role variables), DIR/sglang (fixture checkout),
                              DIR/bin/nvcc (counts compiler runs into DIR/nvcc-calls)

Shared by molecule (molecule/*/create.yml) and pytest (tests/integration/provision). The
packages come from a wheelhouse, build/provision-wheelhouse, downloaded once (stamped):
the CPU torch 2.13.0 wheel found on this machine stands in for the nightly, the real
sglang 0.5.23 and flashinfer-python 0.7.2 wheels from PyPI, and what SGLang's
`launch_server --help` imports. Every install in the tests is then `--no-index
--find-links` (the air-gapped path of the roles).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
WHEELHOUSE = REPO / "build" / "provision-wheelhouse"
MAKE_CHECKOUT = REPO / "tests" / "fixtures" / "sglang_checkout" / "make_checkout.py"
REAL_NVCC = os.environ.get("BWTUNE_TEST_NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
TORCH = "torch==2.13.0"
SGLANG = ["sglang==0.5.23", "flashinfer-python==0.7.2"]
# What `python -m sglang.launch_server --help` of 0.5.23 imports (tests/oracle/make_venv.sh
# keeps the same list for the oracle venvs).
SGLANG_NEEDS = [
    "triton==3.9.0",
    "transformers==5.19.0",
    *[
        "numpy",
        "orjson",
        "psutil",
        "pybase64",
        "requests",
        "packaging",
        "pillow",
        "starlette",
        "msgspec",
        "pydantic",
        "pyzmq",
        "tqdm",
        "IPython",
    ],
    *[
        "aiohttp",
        "huggingface_hub",
        "nvidia-ml-py",
        "einops",
        "apache-tvm-ffi",
        "sentencepiece",
        "setproctitle",
        "uvloop",
        "fastapi",
    ],
    *[
        "uvicorn",
        "python-multipart",
        "partial_json_parser",
        "interegular",
        "openai",
        "prometheus-client",
        "dill",
        "gguf",
    ],
]
BUILD_NEEDS = ["scikit-build-core>=0.10", "cmake>=3.31", "ninja"]


def _pip_download(argv: list[str]) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--disable-pip-version-check",
        "-d",
        str(WHEELHOUSE),
        *argv,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.splitlines() if not ln.startswith("WARNING: Location")][-10:]
        raise SystemExit("scenario.py: pip download failed:\n" + "\n".join(tail))


def wheelhouse() -> Path:
    """build/provision-wheelhouse with every wheel the tests install (downloaded once)."""
    want = json.dumps([TORCH, SGLANG, SGLANG_NEEDS, BUILD_NEEDS])
    stamp = WHEELHOUSE / ".stamp"
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    with open(WHEELHOUSE.parent / "provision-wheelhouse.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text() == want:
            return WHEELHOUSE
        # torch: pip takes the CPU wheel from this machine's disk (its find-links), with its needs.
        _pip_download([TORCH, *SGLANG_NEEDS, *BUILD_NEEDS])
        _pip_download(["--no-deps", *SGLANG])
        stamp.write_text(want)
    return WHEELHOUSE


def torch_version() -> str:
    """The version of the torch 2.13.0 wheel in the wheelhouse (e.g. 2.13.0+cpu)."""
    for wheel in sorted(WHEELHOUSE.glob("torch-2.13.0*.whl")):
        return wheel.name.split("-")[1]
    raise SystemExit(f"scenario.py: no torch 2.13.0 wheel in {WHEELHOUSE}")


def counting_nvcc(bindir: Path, calls: Path) -> Path:
    bindir.mkdir(parents=True, exist_ok=True)
    wrapper = bindir / "nvcc"
    wrapper.write_text(
        "#!/bin/sh\n# Counts compiler runs (tests); a version query compiles nothing.\n"
        f'case "$1" in --version) ;; *) echo "$*" >> {calls} ;; esac\n'
        f'exec {REAL_NVCC} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def checkout(dest: Path) -> dict:
    if (dest / ".git").is_dir():
        commits = {b: _git(dest, "rev-parse", b) for b in ("main", "second", "broken")}
        return {"path": str(dest), "commits": commits}
    out = subprocess.run(
        [sys.executable, str(MAKE_CHECKOUT), str(dest)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def _git(repo: Path, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def role_vars(base: Path, checkout_info: dict, nvcc: Path) -> dict:
    """Role variables for a GPU-less host building the fixture from the wheelhouse."""
    offline = ["--no-index", "--find-links", str(WHEELHOUSE)]
    return {
        "bwtune_stack_root": str(base / "stacks"),
        "bwtune_nvidia_smi": str(base / "bin" / "no-nvidia-smi"),
        "preflight_skip_gpu_check": True,
        "preflight_build_dir": str(base / "build"),
        "preflight_build_disk_gib": 1,
        "preflight_stack_disk_gib": 1,
        "preflight_python": "/usr/bin/python3",
        "preflight_gib_per_job": 1,
        "cuda_toolkit_source": "detect",
        "cuda_toolkit_require_cudnn": False,
        "cuda_toolkit_nvcc_candidates": [str(nvcc)],
        "torch_version": torch_version(),
        "torch_index_url": "",
        "torch_pip_args": list(offline),
        "torch_expected_cuda": "",
        "torch_venv_python": "/usr/bin/python3",
        "sgl_kernel_repo": checkout_info["path"],
        "sgl_kernel_sglang_commit": checkout_info["commits"]["main"],
        "sgl_kernel_build_dir": str(base / "build"),
        "sgl_kernel_wheel_cache": str(base / "wheels"),
        "sgl_kernel_pip_args": list(offline),
        "sglang_package": SGLANG[0],
        "sglang_no_deps": True,
        "sglang_flashinfer_version": SGLANG[1].split("==")[1],
        "sglang_extra_packages": SGLANG_NEEDS,
        "sglang_pip_args": list(offline),
        "provision_wheelhouse": str(base / "controller-wheelhouse"),
    }


def prepare(base: Path) -> dict:
    base = base.resolve()
    base.mkdir(parents=True, exist_ok=True)
    wheelhouse()
    info = checkout(base / "sglang")
    nvcc = counting_nvcc(base / "bin", base / "nvcc-calls")
    variables = role_vars(base, info, nvcc)
    (base / "vars.yml").write_text(yaml.safe_dump(variables, sort_keys=True))
    (base / "commits.json").write_text(json.dumps(info["commits"]))
    return {"vars": variables, "commits": info["commits"], "nvcc_calls": str(base / "nvcc-calls")}


def nvcc_calls(base: Path) -> int:
    calls = base / "nvcc-calls"
    return len(calls.read_text().splitlines()) if calls.is_file() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    prepare(args.dir)
    print(args.dir.resolve() / "vars.yml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
