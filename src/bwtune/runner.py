"""The old name of `bwtune.ansible_run` (issue 22), kept while commands/promote.py and
commands/regress.py still import it: the same module object, so a test that replaces
`ansible_run.run_playbook` replaces theirs too. Import `bwtune.ansible_run` instead.
"""

import sys

from bwtune import ansible_run
from bwtune.ansible_run import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = ansible_run
