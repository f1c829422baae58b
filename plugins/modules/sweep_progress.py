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
    each retry carries the progress, which C(bwtune sweep) turns into its live view. With
    O(wait_s) it waits inside itself for the end, so a playbook can follow a healthy sweep in
    one task that prints no retry.
  - "A sweep that Ansible's async wrapper killed at its limit (C(Timeout exceeded)) has its
    server stopped (the wrapper's kill misses it: servers run in their own sessions); the
    configs it finished are returned with a message saying how to resume."
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
  wait_s:
    description:
      - How long this look may wait for the sweep to end, looking every O(poll_s) seconds,
        before it reports the progress unfinished. V(0) looks once.
      - A playbook that follows the sweep in one quiet task waits for the whole of the async
        limit; C(bwtune sweep) waits a poll interval, so that each retry carries the progress
        of its live view.
    type: float
    default: 0
  poll_s:
    description: Seconds between two looks while waiting (O(wait_s)).
    type: float
    default: 2
  async_s:
    description:
      - The async limit the sweep was started with, to say so when Ansible's async wrapper
        killed the sweep for running past it (its C(Timeout exceeded)).
    type: int
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
    async_s: 172800
    wait_s: 172860  # one task until the end: no retry while the sweep is healthy
  register: progress
  until: progress.finished
  retries: 2
  delay: 0

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
      says why when it did not finish. Its keys, and which are always there, are declared
      in the collection's C(module_utils/_contracts/node_outcome.py).
  returned: when finished
  type: dict
cancel:
  description: What a cancel did.
  returned: when O(cancel=true)
  type: dict
"""

import json
import math
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import (
    node_outcome,
    progress_fields,
    results_contract,
    results_file,
)
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_state


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


JOB_END_WAIT_S = 3.0  # the async wrapper sleeps 1 s after its kill before it writes the job file


def _job_end(async_dir, job_id, wait_s):
    """The job file once it says the job ended, waiting up to wait_s; None if it does not."""
    deadline = time.monotonic() + wait_s
    while True:
        job, _written = _read_job(async_dir, job_id)
        if job is not None and not _job_running(job):
            return job
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


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
    return node_outcome.died(error, lines, stopped)


def _timed_out(job):
    """The async wrapper killed the module for running past its limit (its own wording)."""
    return bool(job.get("failed")) and job.get("msg") == "Timeout exceeded" and "child_pid" in job


def _out_of_time(results_path, progress, async_s):
    """A sweep the async wrapper killed at its limit: its servers (own sessions, out of the
    wrapper's reach) are stopped, what it finished is returned, and how to resume is said."""
    lines = _this_run(results_path, progress.get("run_id"))
    stopped = sweep_state.stop_leftovers_if_free(results_path)
    measured = [line for line in lines if line.get("status") not in results_contract.NOT_LAUNCHED]
    error = (
        "the sweep ran past its async limit (sweep_async_s=%s) and Ansible stopped it%s; "
        "%d configs it measured are kept in %s; to finish it, run the sweep again with the same "
        "run id (bwtune sweep --resume %s) and a larger sweep_async_s"
        % (
            async_s if async_s else "?",
            "; its server (config %s) was stopped" % stopped.get("config_id") if stopped else "",
            len(measured),
            results_path,
            progress.get("run_id") or os.path.basename(os.path.dirname(results_path)),
        )
    )
    return node_outcome.timed_out(error, lines, stopped)


def _look(params):
    """One look at the sweep: (finished, progress view, result or None)."""
    results_path = params["results_path"]
    job, _written = _read_job(params["async_dir"], params["job_id"])
    progress = sweep_state.read_progress(results_path) or {}
    if _job_running(job) and not sweep_state.progress_of_job(progress, params["job_id"]):
        # An earlier run's progress (killed or cancelled, same results file; told by the job
        # that wrote it, not by clocks): this job's sweep has not written its own yet, so it
        # is neither finished nor dead.
        progress = {}
    view = progress_fields.view(progress)
    alive = sweep_state.is_same_process(progress.get("pid"), progress.get("pid_start_time"))
    dead = bool(progress) and not alive
    if dead and _job_running(job):
        # The async wrapper writes why the module ended (killed at its limit, or vanished) a
        # moment after the end: its word is better than a guess.
        job = _job_end(params["async_dir"], params["job_id"], JOB_END_WAIT_S) or job

    # This job's own end comes first: the progress file may still be an earlier run's.
    if job is not None and not _job_running(job):
        if _module_vanished(job):
            result = _died(results_path, progress, progress.get("pid"))
        elif _timed_out(job):
            result = _out_of_time(results_path, progress, params.get("async_s"))
        elif job.get("failed") or job.get("rc"):
            result = node_outcome.failed(job.get("msg") or "the sweep module failed", job.get("results"))
        else:
            result = node_outcome.of_module_result(job)
        return True, view, result

    if progress.get("finished"):
        return True, view, progress.get("result") or {}
    if dead:
        return True, view, _died(results_path, progress, progress.get("pid"))
    return False, view, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            results_path=dict(type="path", required=True),
            job_id=dict(type="str"),
            async_dir=dict(type="path", default="~/.ansible_async"),
            wait_s=dict(type="float", default=0.0),
            poll_s=dict(type="float", default=2.0),
            async_s=dict(type="int"),
            cancel=dict(type="bool", default=False),
            cancel_timeout_s=dict(type="float", default=120.0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name in ("wait_s", "poll_s", "cancel_timeout_s"):
        value = params[name]
        if not (math.isfinite(value) and value >= 0):
            module.fail_json(msg="%s: %r is not a number of seconds >= 0" % (name, value))
    if params["wait_s"] > 0 and params["poll_s"] <= 0:
        module.fail_json(
            msg="poll_s: %r must be > 0 to wait (wait_s %r)" % (params["poll_s"], params["wait_s"])
        )

    if params["cancel"]:
        if module.check_mode:
            module.exit_json(changed=False, finished=True, progress={}, cancel={"cancelled": False})
        outcome = sweep_state.cancel(params["results_path"], params["cancel_timeout_s"])
        module.exit_json(changed=outcome["cancelled"], finished=True, progress={}, cancel=outcome)

    deadline = time.monotonic() + params["wait_s"]
    while True:
        finished, view, result = _look(params)
        left = deadline - time.monotonic()
        if finished or left <= 0:
            break
        time.sleep(min(params["poll_s"], left))
    if finished:
        # What the sweep repaired or skipped (a line that is not a result, a results file
        # removed mid-run) is an Ansible warning too, not only a key of the result.
        for warning in node_outcome.summary_of(result).get("warnings") or []:
            module.warn(str(warning))
        module.exit_json(changed=False, finished=True, progress=view, result=result)
    module.exit_json(changed=False, finished=False, progress=view)


if __name__ == "__main__":
    main()
