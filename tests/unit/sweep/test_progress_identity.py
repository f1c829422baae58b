"""Which sweep a progress file belongs to is told by identity (issue 21 #11): the Ansible
async job the sweep runs in and the node's boot, never a wall-clock start time against a
file's mtime. A clock stepped back between a killed run and its resume made the old
progress file look newer than the new job: the resume took it for its own, called its own
sweep dead, and left it running unfollowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_state

REPO = Path(__file__).resolve().parents[3]
COLLECTIONS = REPO / "build" / "dev-collections"
MODULE = "ansible_collections.bwtune.sglang.plugins.modules.sweep_progress"
WRITE_PROGRESS = (
    "import sys; from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_state; "
    "sweep_state.Progress(sys.argv[1], 'r1', 3)"
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{COLLECTIONS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_a_sweep_run_as_an_async_job_records_its_job_and_boot(tmp_path: Path) -> None:
    # The async wrapper's own shape: `async_wrapper.py <jid> <limit> <module> <args>`, the
    # module its child; the job id is `<jid>.<the wrapper's pid>`.
    wrapper = tmp_path / "async_wrapper.py"
    wrapper.write_text("import subprocess, sys\nsys.exit(subprocess.call(sys.argv[3:]))\n")
    results = tmp_path / "r1" / "results.jsonl"
    results.parent.mkdir()
    subprocess.run(
        [sys.executable, str(wrapper), "j424242", "30", sys.executable, "-c", WRITE_PROGRESS, str(results)],
        check=True,
        env=_env(),
        timeout=60,
    )
    progress = sweep_state.read_progress(str(results))
    assert progress is not None
    assert progress["async_job"] == "j424242" and progress["boot_id"] == sweep_state.boot_id()
    assert sweep_state.progress_of_job(progress, "j424242.31337") is True
    assert sweep_state.progress_of_job(progress, "j1111.31337") is False
    assert sweep_state.progress_of_job({**progress, "boot_id": "another-boot"}, "j424242.1") is False


def test_a_resume_after_the_clock_stepped_back_ignores_the_old_progress_file(tmp_path: Path) -> None:
    results = tmp_path / "r1" / "results.jsonl"
    results.parent.mkdir()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    # The killed run's progress: its sweep is gone, its start "later" than anything now.
    old = {
        "run_id": "r1", "pid": 2**22 - 7, "pid_start_time": 1, "async_job": "j1000",
        "boot_id": boot, "started_at": time.time() + 86400, "planned": 3,
        "done": 1, "failed": 0, "current": None, "eta_s": None, "finished": False, "result": None,
    }  # fmt: skip
    Path(sweep_state.progress_path(str(results))).write_text(json.dumps(old))
    jobs = tmp_path / "async"
    jobs.mkdir()
    (jobs / "j2000.77").write_text(
        json.dumps({"started": True, "finished": False, "ansible_job_id": "j2000.77"})
    )
    args = tmp_path / "args.json"
    params = {"results_path": str(results), "job_id": "j2000.77", "async_dir": str(jobs)}
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
    done = subprocess.run(
        [sys.executable, "-m", MODULE, str(args)], capture_output=True, text=True, env=_env(), timeout=60
    )
    out = json.loads(done.stdout)
    assert out["finished"] is False, out  # this job's sweep runs: not "ended before it finished"
    assert "result" not in out


def test_the_sweeps_warnings_are_ansible_warnings_when_it_ends(tmp_path: Path) -> None:
    results = tmp_path / "r1" / "results.jsonl"
    results.parent.mkdir()
    jobs = tmp_path / "async"
    jobs.mkdir()
    warning = "the results file F was removed or replaced while the sweep ran: ..."
    job = {"results": [], "best": None, "summary": {"warnings": [warning]}, "error": None, "changed": True}
    (jobs / "j3000.1").write_text(json.dumps(job))
    args = tmp_path / "args.json"
    params = {"results_path": str(results), "job_id": "j3000.1", "async_dir": str(jobs)}
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
    done = subprocess.run(
        [sys.executable, "-m", MODULE, str(args)], capture_output=True, text=True, env=_env(), timeout=60
    )
    out = json.loads(done.stdout)
    assert out["finished"] is True and warning in json.dumps(out.get("warnings")), out
