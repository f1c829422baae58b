"""Where the Ansible console scripts (ansible-playbook, ansible-inventory) are."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def bwtune_bin(name: str) -> str:
    """An Ansible console script from this interpreter's environment, else from PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name) or name
