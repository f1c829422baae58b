"""stack_info: probe a fake stack venv (stubs + nvcc-built libraries) and the real oracle venv."""

from __future__ import annotations

import subprocess

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import stack_info


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def test_fake_stack(fake_stack):
    f = stack_info.gather(run, fake_stack["python"], None, driver="580.159.04")
    assert f["torch"]["version"] == "2.11.0+cu130" and f["torch"]["cuda"] == "13.0"
    assert f["torch"]["arch_list"] == ["sm_90", "sm_100", "sm_120"] and f["torch"]["cuda_available"] is False
    k = f["sgl_kernel"]
    assert k["version"] == "0.4.1" and k["sm_targets"] == ["sm_100a", "sm_120a"]
    assert k["sm120a"] and k["sm100a"]
    assert k["libraries"] == {"common_ops.abi3.so": ["sm_120a"], "sm100/common_ops.abi3.so": ["sm_100a"]}
    assert k["fp4_ops"] == ["cutlass_scaled_fp4_mm", "scaled_fp4_quant"] and k["fp4_ops_source"] == "import"
    assert f["flashinfer"]["version"] == "0.7.2"
    s = f["sglang"]
    assert s["version"] == "0.5.23" and s["git_commit"] == fake_stack["commit"]
    assert s["flags"]["moe-runner-backend"]["choices"] == ["auto", "flashinfer_cutlass", "triton"]
    assert s["flags"]["tp-size"]["aliases"] == ["tp"] and s["flags"]["enable-metrics"]["takes_value"] is False
    assert s["flag_count"] == 4
    assert f["warnings"] == []


def test_fingerprint_is_stable_and_moves_with_the_stack(fake_stack):
    a = stack_info.gather(run, fake_stack["python"], None, driver="580.159.04")
    b = stack_info.gather(run, fake_stack["python"], None, driver="580.159.04", include_flags=False)
    assert a["fingerprint"] == b["fingerprint"] and len(a["fingerprint"]) == 12
    other_driver = stack_info.gather(run, fake_stack["python"], None, driver="575.57.08")
    assert other_driver["fingerprint"] != a["fingerprint"]
    # A new sgl_kernel build without sm_120a is a different stack.
    (fake_stack["site"] / "sgl_kernel" / "common_ops.abi3.so").unlink()
    c = stack_info.gather(run, fake_stack["python"], None, driver="580.159.04")
    assert c["sgl_kernel"]["sm_targets"] == ["sm_100a"] and c["fingerprint"] != a["fingerprint"]


def test_sglang_from_a_git_checkout(fake_stack, tmp_path):
    checkout = tmp_path / "sglang-src"
    (checkout / ".git" / "refs" / "heads").mkdir(parents=True)
    (checkout / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (checkout / ".git" / "refs" / "heads" / "main").write_text("f" * 40 + "\n")
    pkg = checkout / "python" / "sglang"
    pkg.mkdir(parents=True)
    assert stack_info.sglang_commit({"path": str(pkg)}) == ("f" * 40, "git checkout")
    # Installed copies never take the commit of a repository the venv sits in.
    site_pkg = tmp_path / "lib" / "site-packages" / "sglang"
    site_pkg.mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    assert stack_info.sglang_commit({"path": str(site_pkg)}) == (None, None)


def test_probe_failure_is_one_line(tmp_path):
    bad = tmp_path / "python"
    bad.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    bad.chmod(0o755)
    with pytest.raises(stack_info.StackFactsError, match=r"failed \(exit 3\): boom"):
        stack_info.gather(run, str(bad), None)
