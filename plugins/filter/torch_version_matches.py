# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whether the torch a venv reports (torch.__version__) is the pinned torch_version."""

from __future__ import annotations

from ansible_collections.bwtune.sglang.plugins.module_utils._provision import torch_pin


def torch_version_matches(reported, pin):
    return torch_pin.version_matches(reported, pin)


class FilterModule:
    def filters(self):
        return {"torch_version_matches": torch_version_matches}
