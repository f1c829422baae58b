#!/usr/bin/python
# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sweep_progress
short_description: Follow or cancel a sweep started by bwtune.sglang.sweep
version_added: "0.1.0"
description:
  - Reads the progress file that a running M(bwtune.sglang.sweep) keeps beside its results
    file, and says whether the sweep has finished.
  - Meant for an C(until) loop after the sweep was started with C(async) and C(poll=0);
    each retry carries the progress, which C(bwtune sweep) turns into its live view.
  - Reports this job's own end first, from the async job file. A sweep module that failed,
    even at once (lock held, read-only folder, a leftover server that would not stop), is
    this run's failure, never an earlier run's success read from the progress file.
  - Notices a sweep that died (its process is gone and it never finished, for example
    killed). It says so, returns the configs it finished (in C(result.results)), and stops
    the server it left running, unless another sweep holds the results file.
  - With O(cancel=true), stops the sweep; the sweep stops its server before it exits.
options:
  results_path:
    description: The results file the sweep writes (its O(bwtune.sglang.sweep#module:results_path)).
    type: path
    required: true
  job_id:
    description:
      - The async job id of the sweep task, to report a sweep module that failed before it
        wrote any progress (for example on a bad matrix).
    type: str
  async_dir:
    description: Where Ansible keeps async job files on the node.
    type: path
    default: ~/.ansible_async
  cancel:
    description: Stop the running sweep instead of reading its progress.
    type: bool
    default: false
  cancel_timeout_s:
    description: How long to wait for the sweep to stop before it is killed.
    type: float
    default: 120
author:
  - bwtune developers (@bwtune)
extends_documentation_fragment:
  - bwtune.sglang.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Start the sweep
  bwtune.sglang.sweep:
    matrix: "{{ matrix }}"
    results_path: /var/lib/bwtune/sweeps/run1/results.jsonl
  async: 172800
  poll: 0
  register: job

- name: Follow the sweep
  bwtune.sglang.sweep_progress:
    results_path: /var/lib/bwtune/sweeps/run1/results.jsonl
    job_id: "{{ job.ansible_job_id }}"
  register: progress
  until: progress.finished
  retries: 86400
  delay: 2

- name: Cancel it
  bwtune.sglang.sweep_progress:
    results_path: /var/lib/bwtune/sweeps/run1/results.jsonl
    cancel: true
"""

RETURN = r"""
finished:
  description: Whether the sweep has ended (done, failed, or died).
  returned: always
  type: bool
progress:
  description: Launches planned and done, failures so far, the config in flight and its phase, ETA.
  returned: always
  type: dict
  sample: {"planned": 12, "done": 3, "failed": 1, "eta_s": 540.0,
           "current": {"config": "c1a2b3c4d5e", "phase": "workload", "workload": 1, "workloads": 2}}
result:
  description:
    - When finished, what the sweep returned (C(results), C(best), C(summary)); C(error)
      says why when it did not finish.
  returned: when finished
  type: dict
cancel:
  description: What a cancel did.
  returned: when O(cancel=true)
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract, results_file, sweep_state


def _read_job(async_dir, job_id):
    """The async job's file and when it was last written, or (None, None) without one."""
    if not job_id:
        return None, None
    path = os.path.join(async_dir, job_id)
    try:
        with open(path) as src:
            job = json.load(src)
        return job, os.stat(path).st_mtime
    except (OSError, ValueError):
        return None, None


def _job_running(job):
    # While the job runs its file says {"started": 1, "finished": 0}; once it ends the file is
    # the module's own result, without "started" (the rule async_status follows).
    return job is not None and "started" in job and not job.get("finished")


def _module_vanished(job):
    """The async wrapper's own failure: the module printed no result (it was killed)."""
    return "data" in job or "outdata" in job


def _this_run(results_path, run_id):
    """The lines of this run the results file holds (each config finished, once)."""
    try:
        lines = results_file.ResultsFile(results_path).read()
    except (OSError, ValueError):
        return []
    run_id = run_id or os.path.basename(os.path.dirname(results_path))
    return [line for line in lines if line.get("run_id") == run_id]


def _died(results_path, progress, pid):
    """What a sweep whose process ended without a result leaves: a designed message, the
    configs it finished, and its server stopped (no live sweep holds the results file)."""
    lines = _this_run(results_path, progress.get("run_id"))
    stopped = sweep_state.stop_leftovers_if_free(results_path)
    measured = [line for line in lines if line.get("status") not in results_contract.NOT_LAUNCHED]
    error = (
        "the sweep process on the node (pid %s) ended before it finished (killed?); "
        "%d configs it measured are kept in %s%s; run the sweep again with the same run id to resume"
        % (
            pid or "?",
            len(measured),
            results_path,
            "; its server (config %s) was stopped" % stopped.get("config_id") if stopped else "",
        )
    )
    return {"error": error, "results": lines, "leftover_stopped": stopped}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            results_path=dict(type="path", required=True),
            job_id=dict(type="str"),
            async_dir=dict(type="path", default="~/.ansible_async"),
            cancel=dict(type="bool", default=False),
            cancel_timeout_s=dict(type="float", default=120.0),
        ),
        supports_check_mode=True,
    )
    results_path = module.params["results_path"]

    if module.params["cancel"]:
        if module.check_mode:
            module.exit_json(changed=False, finished=True, progress={}, cancel={"cancelled": False})
        outcome = sweep_state.cancel(results_path, module.params["cancel_timeout_s"])
        module.exit_json(changed=outcome["cancelled"], finished=True, progress={}, cancel=outcome)

    job, job_written = _read_job(module.params["async_dir"], module.params["job_id"])
    progress = sweep_state.read_progress(results_path) or {}
    if _job_running(job) and float(progress.get("started_at") or 0) < job_written:
        # An earlier run's progress (killed or cancelled, same results file): this job's
        # sweep has not written its own yet, so it is neither finished nor dead.
        progress = {}
    view = {key: progress.get(key) for key in ("planned", "done", "failed", "current", "eta_s", "run_id")}

    # This job's own end comes first: the progress file may still be an earlier run's.
    if job is not None and not _job_running(job):
        if _module_vanished(job):
            result = _died(results_path, progress, progress.get("pid"))
        elif job.get("failed") or job.get("rc"):
            result = {"error": job.get("msg") or "the sweep module failed"}
            if job.get("results"):
                result["results"] = job["results"]
        else:
            result = {key: job.get(key) for key in ("results", "best", "summary", "error")}
        module.exit_json(changed=False, finished=True, progress=view, result=result)

    if progress.get("finished"):
        module.exit_json(changed=False, finished=True, progress=view, result=progress.get("result") or {})
    if progress and not sweep_state.is_same_process(progress.get("pid"), progress.get("pid_start_time")):
        result = _died(results_path, progress, progress.get("pid"))
        module.exit_json(changed=False, finished=True, progress=view, result=result)
    module.exit_json(changed=False, finished=False, progress=view)


if __name__ == "__main__":
    main()
