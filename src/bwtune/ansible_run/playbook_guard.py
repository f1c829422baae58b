"""Run ansible-playbook so that it ends when the `bwtune` that started it ends, killed or not.

ansible-runner starts ansible-playbook in a session of its own that ignores SIGHUP, and
ansible-core runs each worker in yet another session: a SIGKILLed `bwtune` left them all
running, the sweep's "Follow the sweep" worker polling for as long as its retries allowed.

`bwtune.ansible_run.playbooks` starts ansible-playbook through this program:
    python -m bwtune.ansible_run.playbook_guard /path/to/ansible-playbook ARGS...
It asks the kernel for SIGTERM when its parent (the `bwtune` process) dies
(prctl PR_SET_PDEATHSIG, kept across exec), checks the parent did not die already, and
becomes ansible-playbook (exec: same pid). On SIGTERM ansible-playbook's task queue
manager passes SIGTERM to every worker, each worker kills its own process group (the
module it runs), and ansible-playbook exits. A node's detached sweep (async) is not in
that tree and keeps running: that is its design (`bwtune sweep --attach` follows it,
`bwtune cancel` stops it).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_ENV = "BWTUNE_GUARD_PARENT"  # the pid of the bwtune process ansible-playbook must not outlive
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(
            "usage: python -m bwtune.ansible_run.playbook_guard ANSIBLE_PLAYBOOK [ARGS...]", file=sys.stderr
        )
        return 2
    parent = int(os.environ.pop(PARENT_ENV, "0") or 0)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        print(f"bwtune: prctl(PR_SET_PDEATHSIG): {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 1
    if parent and os.getppid() != parent:  # bwtune died before the kernel was asked to tell us
        return 1
    os.execv(args[0], args)
    return 1  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
