"""fatbin: GPU targets read from libraries that nvcc builds here, and from torch's real ones."""

from __future__ import annotations

import json

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import fatbin

from .helpers import GPU_FIXTURES


@pytest.mark.parametrize("target", ["sm_120a", "sm_100a", "sm_90a", "sm_120"])
def test_single_target_libraries(cuda_libs, target):
    t = fatbin.library_targets(str(cuda_libs[target]))
    assert t["sm"] == [target] and t["ptx"] == []


def test_several_targets_compressed_with_ptx(cuda_libs):
    t = fatbin.library_targets(str(cuda_libs["multi"]))
    assert t == {"sm": ["sm_90a", "sm_120a"], "ptx": ["compute_120"], "compressed": True}


def test_package_walk_unions_targets_and_reports_non_elf(tmp_path, cuda_libs):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.so").write_bytes(cuda_libs["sm_120a"].read_bytes())
    (tmp_path / "sub" / "b.so").write_bytes(cuda_libs["sm_100a"].read_bytes())
    (tmp_path / "broken.so").write_bytes(b"not an elf")
    t = fatbin.package_targets(str(tmp_path))
    assert t["sm"] == ["sm_100a", "sm_120a"]
    assert set(t["libraries"]) == {"a.so", "sub/b.so"}
    assert t["errors"] == {"broken.so": "not an ELF file"}


def test_real_torch_libraries_read_on_the_h200():
    """Recorded on the H200 machine: libtorch_cuda.so (456 MB, compressed) carries the
    arch-specific targets, and its plain targets cover torch's own arch list."""
    rec = json.loads((GPU_FIXTURES / "h200-2gpu" / "torch_fatbin.json").read_text())
    lib = rec["libraries"]["libtorch_cuda.so"]
    assert {"sm_90a", "sm_100a", "sm_120a"} <= set(lib["sm"])
    assert set(rec["arch_list"]) <= set(lib["sm"])
