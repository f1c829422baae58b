"""The three modules run through Ansible itself, with a fake nvidia-smi on PATH."""

from __future__ import annotations

import shutil

import pytest

from tests.unit.facts.helpers import GPU_SETS, fake_nvidia_smi, run_module, system_path_without_nvidia_smi

# Each test runs a real `ansible localhost -m ...` process (~1.5 CPU-s): not the fast loop.
pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("fixture", "sm", "interconnect"),
    [
        ("rtx-pro-6000-8gpu", "sm120", "pcie"),
        ("b200-8gpu", "sm100", "nvlink"),
        ("h200-2gpu", "sm90", "nvlink"),
    ],
)
def test_gpu_facts_module_with_fake_nvidia_smi(tmp_path, fixture, sm, interconnect):
    bindir = tmp_path / "bin"
    fake_nvidia_smi(bindir)
    res = run_module(
        "gpu_facts",
        "",
        {"FAKE_SMI_DIR": str(GPU_SETS[fixture])},
        [str(bindir), *system_path_without_nvidia_smi()],
    )
    assert res.get("changed") is False, res
    f = res["ansible_facts"]["bwtune_gpu"]
    assert f["available"] and f["sm"] == sm and f["interconnect"] == interconnect


def test_gpu_facts_module_nvml_mismatch(tmp_path):
    bindir, data = tmp_path / "bin", tmp_path / "data"
    fake_nvidia_smi(bindir)
    data.mkdir()
    (data / "fail.out").write_text("Failed to initialize NVML: Driver/library version mismatch\n")
    (data / "fail.rc").write_text("18")
    res = run_module(
        "gpu_facts", "", {"FAKE_SMI_DIR": str(data)}, [str(bindir), *system_path_without_nvidia_smi()]
    )
    f = res["ansible_facts"]["bwtune_gpu"]
    assert res["_status"] == "SUCCESS"
    assert f["available"] is False and f["reason"] == "nvml-init-failed"
    assert "Driver/library version mismatch" in f["message"]


def test_gpu_facts_module_without_nvidia_smi():
    res = run_module("gpu_facts", "", {}, system_path_without_nvidia_smi())
    f = res["ansible_facts"]["bwtune_gpu"]
    assert f["available"] is False and f["reason"] == "nvidia-smi-missing"


def test_stack_facts_module_refuses_a_missing_python(tmp_path):
    res = run_module("stack_facts", f"python={tmp_path}/nope", {}, system_path_without_nvidia_smi())
    assert res["_status"] == "FAILED!"
    assert res["msg"] == f"python: {tmp_path}/nope is not an executable file"


def test_stack_facts_module_runs_the_probe(tmp_path):
    bindir = tmp_path / "bin"
    fake_nvidia_smi(bindir)
    python = shutil.which("python3")
    assert python
    res = run_module(
        "stack_facts",
        f"python={python} include_flags=false",
        {"FAKE_SMI_DIR": str(tmp_path)},
        [str(bindir), *system_path_without_nvidia_smi()],
    )
    f = res["ansible_facts"]["bwtune_stack"]
    assert res["changed"] is False
    assert f["driver_version"] == "580.159.04"  # asked the (fake) nvidia-smi
    assert len(f["fingerprint"]) == 12 and f["python_version"]
