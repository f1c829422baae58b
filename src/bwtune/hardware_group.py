"""The hardware group moved to bwtune.analysis.hardware_group (one definition for promote,
regression, the adaptive prior and facts); this name stays for its importers."""

from bwtune.analysis.hardware_group import HardwareGroup, Selection, select, why_not_in

__all__ = ["HardwareGroup", "Selection", "select", "why_not_in"]
