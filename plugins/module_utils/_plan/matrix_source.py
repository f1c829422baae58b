# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Where a sweep matrix file is, and what its relative `model.path` means.

The one rule for both routes into a sweep: `bwtune sweep -m FILE` (src/bwtune/matrix_file.py)
and plain `ansible-playbook playbooks/sweep.yml -e sweep_matrix_file=FILE` (the
`bwtune.sglang.sweep_matrix` lookup the sweep role calls on the controller).

- A relative matrix path is looked up against the current directory first (where the user
  typed the command), then against the given fallbacks (the playbook's directory).
- A relative `model.path` inside the matrix is relative to the matrix file's directory
  (as in docker-compose files); `~/...` is left for the node to expand.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any


class MatrixSourceError(ValueError):
    """The matrix file cannot be found: the message names the path and where it looked."""


def locate(path: str, fallbacks: Iterable[str] = (), cwd: str | None = None) -> str:
    """The absolute path of matrix file `path`; MatrixSourceError when it is nowhere."""
    given = os.path.expanduser(str(path))
    if os.path.isabs(given):
        if os.path.exists(given):  # not only regular files: the reader says what else it is
            return given
        raise MatrixSourceError("%s: cannot read: no such file" % path)
    tried = []
    for base in [cwd or os.getcwd(), *fallbacks]:
        candidate = os.path.normpath(os.path.join(base, given))
        if candidate in tried:
            continue
        if os.path.isfile(candidate):
            return candidate
        tried.append(candidate)
    raise MatrixSourceError("%s: cannot read: no such file (looked for %s)" % (path, ", ".join(tried)))


def resolve_model_path(matrix: Any, matrix_path: str) -> Any:
    """`matrix` with a relative `model.path` made absolute against the matrix file's folder.

    Anything that is not a mapping with a `model.path` string is returned as it is; the
    planner names what is wrong with it.
    """
    if not isinstance(matrix, Mapping):
        return matrix
    model = matrix.get("model")
    if not isinstance(model, Mapping):
        return matrix
    model_path = model.get("path")
    if not isinstance(model_path, str) or not model_path or model_path.startswith("~"):
        return matrix
    if os.path.isabs(model_path):
        return matrix
    folder = os.path.dirname(os.path.abspath(matrix_path))
    resolved = os.path.realpath(os.path.join(folder, model_path))
    return {**matrix, "model": {**model, "path": resolved}}
