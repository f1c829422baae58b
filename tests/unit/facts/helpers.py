"""Shared helpers for the facts tests: fixture paths, a fake nvidia-smi, running modules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GPU_FIXTURES = ROOT / "tests" / "fixtures" / "gpu"
VENV_BIN = Path(sys.executable).parent
ANSIBLE = str(VENV_BIN / "ansible")

# Where each fixture keeps its three nvidia-smi outputs.
GPU_SETS = {
    "h200-1gpu": GPU_FIXTURES / "h200-1gpu" / "raw",
    "h200-2gpu": GPU_FIXTURES / "h200-2gpu" / "raw",
    "rtx-pro-6000-8gpu": GPU_FIXTURES / "rtx-pro-6000-8gpu",
    "b200-8gpu": GPU_FIXTURES / "b200-8gpu",
}

FAKE_SMI = """#!{python}
# Fake nvidia-smi: prints the fixture file that matches its arguments.
import os, sys
d = os.environ["FAKE_SMI_DIR"]
args = sys.argv[1:]
if os.path.exists(os.path.join(d, "fail.out")):
    sys.stdout.write(open(os.path.join(d, "fail.out")).read())
    sys.exit(int(open(os.path.join(d, "fail.rc")).read()))
name = {{("-q", "-x"): "nvidia-smi-q-x.out", ("topo", "-m"): "nvidia-smi-topo-m.out"}}.get(tuple(args))
if name is None and args and args[0].startswith("--query-gpu=index,uuid,compute_cap"):
    name = "query-gpu-caps.out"
if name is None and args and args[0] == "--query-gpu=driver_version":
    sys.stdout.write("580.159.04\\n")
    sys.exit(0)
path = os.path.join(d, name) if name else None
if not path or not os.path.exists(path):
    sys.stderr.write("fake nvidia-smi: no fixture for %r\\n" % (args,))
    sys.exit(2)
sys.stdout.write(open(path).read())
"""


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def fake_nvidia_smi(bindir: Path) -> Path:
    """Write a fake nvidia-smi into bindir; FAKE_SMI_DIR picks the fixture set."""
    bindir.mkdir(parents=True, exist_ok=True)
    smi = bindir / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(python=sys.executable), encoding="utf-8")
    smi.chmod(0o755)
    return smi


def run_module(module: str, args: str, env_extra: dict[str, str], path_dirs: list[str]) -> dict:
    """Run `ansible localhost -m bwtune.sglang.<module>` and return the module's result."""
    env = {
        **os.environ,
        **env_extra,
        "PATH": os.pathsep.join(path_dirs),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
    }
    argv = [
        ANSIBLE,
        "localhost",
        "-o",
        "-m",
        f"bwtune.sglang.{module}",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
    ]
    if args:
        argv += ["-a", args]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    # -o prints one line per host: "localhost | SUCCESS => {...}"
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("localhost | ")), None)
    if line is None or "=> " not in line:
        raise AssertionError(f"ansible printed no result (rc {proc.returncode}): {proc.stdout}{proc.stderr}")
    head, body = line.split("=> ", 1)
    result = json.loads(body)
    result["_status"] = head.split("|")[1].strip()  # SUCCESS, FAILED!
    return result


def system_path_without_nvidia_smi() -> list[str]:
    dirs = [str(VENV_BIN)]
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if d and not os.path.exists(os.path.join(d, "nvidia-smi")):
            dirs.append(d)
    assert shutil.which("nvidia-smi", path=os.pathsep.join(dirs)) is None
    return dirs
