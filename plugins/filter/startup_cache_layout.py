# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The start-up cache variables under a cache directory, as startup_caches.STARTUP_CACHE_LAYOUT lays them out.

The server role's environment file (roles/server/templates/environment.j2) reads the layout
through this filter, so the served SGLang finds its caches where every sweep launch put
them, from one declaration (issue 22). The path is joined as text (`<dir>/<sub>`, the
directory itself for an empty sub), never normalised: the rendered file is the one it was.
"""

from __future__ import annotations

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import startup_caches


def startup_cache_layout(cache_dir):
    """[[variable, path], ...] in the layout's order."""
    root = str(cache_dir)
    layout = startup_caches.STARTUP_CACHE_LAYOUT
    return [[name, "%s/%s" % (root, sub) if sub else root] for name, sub in layout]


class FilterModule:
    def filters(self):
        return {"startup_cache_layout": startup_cache_layout}
