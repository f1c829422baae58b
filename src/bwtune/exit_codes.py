"""The exit codes of every `bwtune` command, defined once (docs/cli.md lists them)."""

from __future__ import annotations

import signal

OK = 0
# A host failed or was unreachable, or a run is still running on a node (stderr says which).
HOST_FAILED = 1
# `bwtune regress` found a regression (a config slower, or failing, against its history).
REGRESSION = 1
# `bwtune recipe verify-signature`: the signature does not hold; `bwtune recipe verify`: the
# recipe did not reproduce (slower, or could not run).
NOT_VERIFIED = 1
# Bad input: inventory, --limit, matrix, run id, -e, an unusable results database.
BAD_INPUT = 2
# The sweep ran but measured nothing: every launch failed or nothing was launched.
NOTHING_MEASURED = 3
# Ctrl-C (SIGINT) or SIGTERM: the run was cancelled, the nodes stopped.
CANCELED = 128 + signal.SIGINT
# stdout was closed early (`bwtune runs --json | head`): what a process killed by SIGPIPE reports.
BROKEN_PIPE = 128 + signal.SIGPIPE
