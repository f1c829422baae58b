"""The fake nvidia-smi: the profile's GPUs, and memory held only by live stand-ins."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest


def _record(state_dir, pid: int, gpus: list[int], used: int, held_until: float | None = None) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / f"{pid}.json").write_text(
        json.dumps({"pid": pid, "gpus": gpus, "used_mib": used, "port": 1, "held_until": held_until})
    )


def test_query_gpu_reports_profile_gpus(smi):
    out = smi("--query-gpu=index,name,memory.total,memory.used,compute_cap", "--format=csv,noheader,nounits")
    rows = [line.split(", ") for line in out.stdout.splitlines()]
    assert out.returncode == 0 and len(rows) == 8
    assert rows[0] == ["0", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "97887", "0", "12.0"]
    with_units = smi("--query-gpu=memory.total", "--format=csv")
    assert with_units.stdout.splitlines()[:2] == ["memory.total [MiB]", "97887 MiB"]
    bad = smi("--query-gpu=warp.speed", "--format=csv")
    assert bad.returncode == 2 and 'Field "warp.speed" is not a valid field to query.' in bad.stdout


def test_b200_profile(smi, standin_env):
    standin_env["BWTUNE_STANDIN_PROFILE"] = "b200x8-qwen35-397b-nvfp4"
    out = smi("--query-gpu=name,compute_cap", "--format=csv,noheader")
    assert out.stdout.splitlines()[0] == "NVIDIA B200, 10.0"


def test_memory_counts_only_live_processes(smi, standin_env, tmp_path):
    state = tmp_path / "gpu-state"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        _record(state, sleeper.pid, [0, 1], 50000)
        _record(state, dead.pid, [2], 70000)
        _record(state, dead.pid + 100000, [3], 1000, held_until=time.time() + 60)  # exited, still releasing
        used = smi(
            "--query-gpu=index,memory.used,memory.free", "--format=csv,noheader,nounits"
        ).stdout.splitlines()
        assert used[0] == f"0, 50000, {97887 - 512 - 50000}"
        assert used[2].startswith("2, 0,") and used[3].startswith("3, 1000,")
        apps = smi(
            "--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv,noheader,nounits"
        ).stdout.splitlines()
        pids = [line.split(", ")[0] for line in apps]
        assert pids.count(str(sleeper.pid)) == 2 and str(dead.pid) not in pids
        uuids = smi("--query-gpu=uuid", "--format=csv,noheader").stdout.splitlines()
        assert apps[0].split(", ")[2] == uuids[0]
        xml = ET.fromstring(smi("-q", "-x").stdout)
        gpus = xml.findall("gpu")
        assert xml.findtext("attached_gpus") == "8" and len(gpus) == 8
        assert gpus[0].findtext("fb_memory_usage/used") == "50000 MiB"
        assert gpus[0].findtext("processes/process_info/pid") == str(sleeper.pid)
        assert gpus[5].find("processes/process_info") is None
    finally:
        sleeper.kill()
        sleeper.wait()
    after = smi("--query-gpu=memory.used", "--format=csv,noheader,nounits").stdout.splitlines()
    assert after[0] == "0"


def test_running_standin_holds_memory_and_releases_it(healthy, smi, standin_env):
    server = healthy()
    used = [int(x) for x in smi("--query-gpu=memory.used", "--format=csv,noheader,nounits").stdout.split()]
    assert all(u > 30000 for u in used)  # weights + KV cache on all 8 GPUs (tp 8)
    apps = smi("--query-compute-apps=pid", "--format=csv,noheader").stdout.split()
    assert set(apps) == {str(server.proc.pid)}
    assert server.stop() == 0
    used = [int(x) for x in smi("--query-gpu=memory.used", "--format=csv,noheader,nounits").stdout.split()]
    assert used == [0] * 8


@pytest.mark.slow  # waits on a stand-in's simulated start-up or release delay (2-4 s)
def test_release_delay_keeps_memory_for_a_while(launch, smi, standin_env):
    delay = 5.0  # long enough that the first nvidia-smi comes before it on a busy machine
    server = launch("--quantization", "modelopt_fp4", "--tp-size", "2",
                    env={"BWTUNE_STANDIN_RELEASE_DELAY_S": str(delay)})  # fmt: skip
    server.wait_healthy()
    stopping = time.monotonic()
    server.stop()
    first = smi("--query-gpu=memory.used", "--format=csv,noheader,nounits").stdout.split()
    assert int(first[0]) > 0 and int(first[1]) > 0 and first[2:] == ["0"] * 6
    # Released once the delay has passed since the server exited (after `stopping`), not before.
    while smi("--query-gpu=memory.used", "--format=csv,noheader,nounits").stdout.split() != ["0"] * 8:
        assert time.monotonic() - stopping < delay + 30, "the memory was never released"
        time.sleep(0.2)
    assert time.monotonic() - stopping >= delay


def test_cuda_visible_devices_picks_gpus(launch, smi):
    server = launch("--quantization", "modelopt_fp4", "--tp-size", "2", env={"CUDA_VISIBLE_DEVICES": "6,7"})
    server.wait_healthy()
    used = smi("--query-gpu=memory.used", "--format=csv,noheader,nounits").stdout.split()
    assert [int(u) > 0 for u in used] == [False] * 6 + [True] * 2
