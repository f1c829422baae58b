# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """Attribute descriptions shared by the collection's modules (each module sets `support`)."""

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: >-
      Will return details on what has changed (or possibly needs changing in check_mode),
      when in diff mode.
"""

    # Facts modules: they read the node and change nothing.
    FACTS = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
"""
