"""`bwtune facts` end to end: playbooks/facts.yml on localhost hosts with fake nvidia-smi programs.

Each inventory host is this machine (local connection) with its own nvidia-smi through the
host var `bwtune_nvidia_smi`: the stand-in's fake one (8x RTX PRO 6000, simulated) or one
that prints the recorded H200 capture. The command prints one row per host and groups the
hosts whose hardware and stack fingerprint match.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
STANDIN_SMI = REPO / "src" / "bwtune" / "standin" / "bin" / "nvidia-smi"
H200_RAW = REPO / "tests" / "fixtures" / "gpu" / "h200-1gpu" / "raw"

# Prints the recorded H200 outputs; the capture has no compute_cap query (the name tells it).
FAKE_H200_SMI = """#!{python}
import sys
files = {{("-q", "-x"): "nvidia-smi-q-x.out", ("topo", "-m"): "nvidia-smi-topo-m.out"}}
name = files.get(tuple(sys.argv[1:]))
if name is None:
    sys.stderr.write("fake nvidia-smi: not recorded: %r\\n" % (sys.argv[1:],))
    sys.exit(2)
sys.stdout.write(open({raw!r} + "/" + name).read())
"""


@pytest.fixture
def h200_smi(tmp_path: Path) -> Path:
    smi = tmp_path / "h200-bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(FAKE_H200_SMI.format(python=sys.executable, raw=str(H200_RAW)), encoding="utf-8")
    smi.chmod(0o755)
    return smi


def inventory(tmp_path: Path, hosts: dict[str, Path], simulated: tuple[str, ...] = ()) -> Path:
    entries: dict[str, Any] = {}
    for name, smi in hosts.items():
        entries[name] = {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "bwtune_nvidia_smi": str(smi),
            # A Python without torch or SGLang: the stack facts say so, quickly.
            "bwtune_stack_python": sys.executable,
            "bwtune_model_path": str(tmp_path / "no-model"),
            **({"bwtune_simulated": True} if name in simulated else {}),
        }
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": entries}}), encoding="utf-8")
    return path


def bwtune_facts(tmp_path: Path, inv: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["BWTUNE_HOME"] = str(tmp_path / "home")
    env.pop("BWTUNE_STANDIN_PROFILE", None)  # the stand-in's default: 8x RTX PRO 6000
    argv = [sys.executable, "-m", "bwtune.cli", "facts", "-i", str(inv), "--quiet", *extra]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240, check=False)


def test_two_hosts_with_different_gpus_are_two_rows_and_two_groups(tmp_path: Path, h200_smi: Path) -> None:
    inv = inventory(tmp_path, {"h200": h200_smi, "rtx": STANDIN_SMI}, simulated=("rtx",))
    done = bwtune_facts(tmp_path, inv, "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    rows = {row["host"]: row for row in out["rows"]}
    h200, rtx = rows["h200"], rows["rtx (simulated)"]
    assert h200["GPUs"] == "1 x NVIDIA H200" and h200["sm"] == "sm90"
    assert (h200["driver"], h200["CUDA"]) == ("580.159.04", "13.0")
    assert rtx["GPUs"] == "8 x NVIDIA RTX PRO 6000 Blackwell Server Edition" and rtx["sm"] == "sm120"
    for row in (h200, rtx):
        # This venv has no torch, sgl_kernel or SGLang: the row says so, the stack still has a fingerprint.
        assert (row["torch"], row["sgl_kernel"], row["sglang"]) == ("-", "-", "-")
        assert len(row["fingerprint"]) == 12
    # The driver is part of the fingerprint.
    assert h200["fingerprint"] != rtx["fingerprint"]
    assert out["groups"] == [["h200"], ["rtx (simulated)"]]
    stack = out["hosts"]["h200"]["bwtune_stack"]
    assert stack["sglang"]["installed"] is False and stack["python"] == sys.executable


def test_two_hosts_with_the_same_gpu_and_stack_are_one_group(tmp_path: Path, h200_smi: Path) -> None:
    inv = inventory(tmp_path, {"node-a": h200_smi, "node-b": h200_smi})
    done = bwtune_facts(tmp_path, inv)
    assert done.returncode == 0, done.stderr
    assert "sweep group 1: node-a, node-b" in done.stdout
    assert "sweep group 2" not in done.stdout
    for column in ("GPUs", "sm", "driver", "CUDA", "torch", "sgl_kernel", "sglang", "fingerprint"):
        assert column in done.stdout
    assert "sm90" in done.stdout and "580.159.04" in done.stdout


def test_a_host_without_nvidia_smi_is_a_row_saying_so(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {"cpu-only": tmp_path / "missing" / "nvidia-smi"})
    done = bwtune_facts(tmp_path, inv, "--json")
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)["rows"][0]
    assert row["GPUs"] == "none (nvidia-smi-missing)" and row["sm"] == "-"
