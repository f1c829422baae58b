# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Whether the torch a venv reports is the pinned one, whichever way the pin is spelled.

torch reports itself as `torch.__version__` with its build as a local tag (`2.13.0+cu130`);
its distribution metadata may say `2.13.0` (PyPI's CUDA wheels), or the same as
`__version__` (PyTorch's own indexes). A pin without a local tag (`2.13.0`) matches any
build of that version, the CUDA build then being checked on its own (`torch.version.cuda`);
a pin with one (`2.13.0+cu130`, `2.12.0.dev20260307+cu130`) must match the reported local
tag as well. Standard library only.
"""

from __future__ import annotations

from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import versions


def split(version: str) -> tuple[str, str]:
    """'2.13.0+cu130' -> ('2.13.0', 'cu130'); '2.13.0' -> ('2.13.0', '')."""
    public, _plus, local = str(version or "").strip().partition("+")
    return public, local.lower()


def _same_public(a: str, b: str) -> bool:
    try:
        return versions.compare(a, b) == 0
    except versions.VersionError:  # a pre-release or another form: compare as written
        return a.lower() == b.lower()


def version_matches(reported: str | None, pin: str) -> bool:
    """`reported` (torch.__version__) satisfies the pin `pin` (torch_version)."""
    if not reported or not pin:
        return False
    have, have_local = split(reported)
    want, want_local = split(pin)
    if not _same_public(have, want):
        return False
    return not want_local or want_local == have_local
