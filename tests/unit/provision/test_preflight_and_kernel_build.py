"""preflight: one line per missing piece with the numbers; kernel_build: options, targets, wheels."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import kernel_build as kb
from ansible_collections.bwtune.sglang.plugins.module_utils._provision import preflight as pf
from ansible_collections.bwtune.sglang.plugins.module_utils._provision import stack_root as sl
from ansible_collections.bwtune.sglang.plugins.modules import stack_preflight
from tests.unit.provision import direct

GIB = pf.GIB


def test_job_count_is_sized_by_memory_and_cores() -> None:
    assert pf.build_jobs(64 * GIB, 32, 4, None) == (16, None)  # memory-bound
    assert pf.build_jobs(512 * GIB, 8, 4, None) == (8, None)  # core-bound
    jobs, why = pf.build_jobs(3 * GIB, 8, 4, None)
    assert jobs == 0 and why == "memory: 3.0 GiB available, a build job needs 4 GiB: not even one job fits"


def test_a_job_count_that_would_exhaust_memory_is_refused() -> None:
    assert pf.build_jobs(64 * GIB, 32, 4, 16) == (16, None)
    _, why = pf.build_jobs(30 * GIB, 32, 4, 16)
    assert why == "memory: 16 build jobs x 4 GiB = 64 GiB, only 30.0 GiB available (at most 7 jobs fit)"


def test_checks_name_found_and_needed_numbers(tmp_path: Path) -> None:
    assert pf.check_driver("580.159.04", "580.65.06") == []
    assert pf.check_driver("575.57.08", "580.65.06") == [
        "driver: 575.57.08 is older than 580.65.06, the minimum for CUDA 13.0"
    ]
    assert pf.check_driver(None, "580.65.06")[0].startswith("driver: no NVIDIA driver version found")
    gpu = {"available": True, "sm": "sm89", "message": "1 x NVIDIA L40S"}
    assert pf.check_gpu(gpu, ["sm90", "sm120"]) == ["gpu: 1 x NVIDIA L40S is sm89, supported: sm90, sm120"]
    assert pf.check_gpu({"available": False, "message": "nvidia-smi not found"}, ["sm120"]) == [
        "gpu: no usable GPU (nvidia-smi not found)"
    ]
    assert pf.check_python("3.9.18", "3.10") == ["python: 3.9.18 is older than 3.10"]
    assert pf.check_glibc("2.41", "2.41")[0].startswith(
        "glibc: 2.41 is >= 2.41, where FlashInfer's JIT compilation breaks; set preflight_accept_glibc_risk"
    )
    assert pf.check_glibc("2.36", "2.41") == []
    assert pf.check_cores(1, 4) == ["cores: 1 online, the build needs at least 4"]
    # Disk: a path that does not exist yet is measured at its nearest existing parent.
    where, free = pf.free_bytes(str(tmp_path / "not" / "yet"))
    assert where == str(tmp_path) and free > 0
    [line] = pf.check_disk(str(tmp_path / "x"), 10**9, "the build")
    assert line.startswith("disk: ") and f"free at {tmp_path}, the build needs 1e+09 GiB" in line
    assert pf.check_disk(str(tmp_path), 0, "the checkpoint") == []


def test_mem_available_is_read_from_meminfo() -> None:
    assert pf.mem_available_bytes("MemTotal: 100 kB\nMemAvailable:   2048 kB\n") == 2048 * 1024
    with pytest.raises(ValueError):
        pf.mem_available_bytes("MemTotal: 100 kB\n")


def test_cmake_args_and_required_targets_follow_the_options() -> None:
    opts = {"enable_fp4": True, "enable_sm100a": False, "compile_threads": 2, "enable_below_sm90": None}
    assert kb.cmake_args(opts, ["-DX=1"]) == [
        "-DSGL_KERNEL_ENABLE_FP4=ON",
        "-DSGL_KERNEL_ENABLE_SM100A=OFF",
        "-DSGL_KERNEL_COMPILE_THREADS=2",
        "-DX=1",
    ]
    assert kb.required_targets(opts) == ["sm_120a"]
    assert kb.required_targets({"enable_fp4": True, "enable_sm100a": True}, ["sm_90"]) == [
        "sm_100a",
        "sm_120a",
        "sm_90",
    ]
    assert kb.required_targets({"enable_fp4": False}) == []
    env = kb.build_env({"PATH": "/usr/bin"}, 3, ["-DA=1", "-DB=2"], "/opt/cuda/bin/nvcc")
    assert env["MAX_JOBS"] == env["CMAKE_BUILD_PARALLEL_LEVEL"] == "3"
    assert env["CMAKE_ARGS"] == "-DA=1 -DB=2" and env["CUDACXX"] == "/opt/cuda/bin/nvcc"
    assert env["PATH"].startswith("/opt/cuda/bin:")
    assert "--no-build-isolation" in kb.wheel_argv("/v/bin/python", "/src", "/out")


def test_wheels_of_both_names_are_found_and_read(tmp_path: Path, cuda_libs: dict) -> None:
    for name in (
        "sglang_kernel-0.4.1-cp311-cp311-linux_x86_64.whl",
        "sgl_kernel-0.3.0-cp311-cp311-linux_x86_64.whl",
    ):
        with zipfile.ZipFile(tmp_path / name, "w") as zf:
            zf.writestr("sgl_kernel/__init__.py", "")
            zf.write(cuda_libs["multi"], "sgl_kernel/common_ops.so")
    (tmp_path / "torch-2.13.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    (tmp_path / ".sglang_kernel-0.4.1-cp311-cp311-linux_x86_64.whl.tmp").write_bytes(b"")
    wheels = kb.find_wheels(str(tmp_path))
    assert [Path(w).name.split("-")[0] for w in wheels] == ["sgl_kernel", "sglang_kernel"]
    targets = kb.wheel_targets(wheels[1])
    assert targets["sm"] == ["sm_90a", "sm_120a"] and list(targets["libraries"]) == [
        "sgl_kernel/common_ops.so"
    ]
    assert kb.missing_targets(targets, ["sm_120a", "sm_100a"]) == ["sm_100a"]


def test_log_tail_reads_the_end(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert kb.log_tail(str(log), 3) == ["line 97", "line 98", "line 99"]
    assert kb.log_tail(str(tmp_path / "missing.log")) == []


class _Warns:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warn(self, text: str) -> None:
        self.warnings.append(text)


def test_failed_stack_attempts_count_as_reclaimable_disk_and_building_deletes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "stacks"
    base = {
        "torch_version": "2.12.0",
        "sglang_commit": "a" * 40,
        "cuda_version": "13.0",
        "python_version": "3.12",
        "arch": "x86_64",
        "flashinfer_version": "",
        "options": {},
    }
    good = {**base, "torch_version": "2.11.0"}
    sl.write_manifest(str(root), good, verified=True)
    sl.switch_current(str(root), sl.fingerprint(good))
    failed = sl.fingerprint(base)
    sl.write_manifest(str(root), base, verified=False)  # a failed attempt: 1 MiB of "torch"
    (root / failed / "torch.so").write_bytes(os.urandom(1 << 20))
    busy_inputs = {**base, "cuda_version": "12.9"}
    busy = sl.fingerprint(busy_inputs)
    sl.write_manifest(str(root), busy_inputs, verified=False)  # unverified, but a process runs in it
    (root / ("f" * 12)).mkdir()  # fingerprint-named, but no manifest: not a stack (a build's work dir)
    held = sl.disk_bytes(str(root / failed))
    assert held >= 1 << 20

    free = 2 * pf.GIB
    monkeypatch.setattr(pf, "free_bytes", lambda path: (str(root), free))
    disk = {"path": str(root), "what": "a new stack venv"}
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=root / busy)
    try:
        # Short of space, even counting the failed attempt: the line says what it holds.
        module, found = _Warns(), {}
        lines = stack_preflight.check_disk(module, {**disk, "need_gib": 3}, found)
        assert len(lines) == 1
        assert lines[0].startswith(f"disk: 2.0 GiB free at {root} and 0.0 GiB more is held by 1 unverified")
        assert (
            f"({failed}), which provisioning deletes before it builds; a new stack venv needs 3 GiB"
            in lines[0]
        )
        assert found[str(root)]["stacks"] == {failed: held}
        # Enough once the failed attempt goes: it passes, and a warning says why.
        need = (free + held / 2) / pf.GIB
        assert stack_preflight.check_disk(module, {**disk, "need_gib": need}, {}) == []
        assert len(module.warnings) == 1 and "enough only because" in module.warnings[0]
        assert failed in module.warnings[0] and busy not in module.warnings[0]

        # state=building of the next stack deletes the failed attempt first (check mode: says only).
        nxt = {**base, "sglang_commit": "b" * 40}
        args = {"root": str(root), "state": "building", "inputs": nxt}
        res = direct.run("stack_layout", {**args, "_ansible_check_mode": True}, tmp_path)
        assert res["removed"] == [failed] and (root / failed).is_dir()
        res = direct.run("stack_layout", args, tmp_path)
        assert res["removed"] == [failed], res
        left = [sl.fingerprint(good), busy, sl.fingerprint(nxt), "f" * 12]
        assert sorted(sl.stacks(str(root))) == sorted(left)
    finally:
        worker.kill()
        worker.wait()
