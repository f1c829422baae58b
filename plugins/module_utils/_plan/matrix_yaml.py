# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Read a matrix file's text safely: the one reader for the CLI, the sweep role's lookup and
the node.

Refused before anything is expanded, each with one line naming the file (and line):
- anything but a regular file (`/dev/zero`, a FIFO, a folder): never read;
- a file larger than MAX_BYTES (read at most that much);
- YAML whose aliases expand to more than MAX_NODES nodes (an "anchor bomb"), or that
  nests deeper than MAX_DEPTH, or refers to itself;
- a key given twice in one mapping (YAML would silently keep the last): both lines named.

The limits are generous for any real matrix (examples/ are a few KB and a few hundred
nodes) and can be raised through the environment (docs/matrix.md#limits). PyYAML is
imported only for YAML text: a node without it still reads JSON.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

MAX_BYTES = 1024 * 1024
MAX_NODES = 100_000
MAX_DEPTH = 64
BYTES_ENV = "BWTUNE_MATRIX_MAX_BYTES"
NODES_ENV = "BWTUNE_MATRIX_MAX_NODES"


class MatrixTextError(ValueError):
    """A matrix file or text that is refused; the message names the file and, when known, the line."""


def limit(env: str, default: int) -> int:
    """A limit, as the environment raises (or lowers) it."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise MatrixTextError("%s: expected a whole number, got %r" % (env, raw)) from None
    if value < 1:
        raise MatrixTextError("%s: expected a number >= 1, got %d" % (env, value))
    return value


def read_text(path: str) -> str:
    """The text of a matrix file: a regular file of at most MAX_BYTES, UTF-8."""
    max_bytes = limit(BYTES_ENV, MAX_BYTES)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise MatrixTextError("%s: cannot read: %s" % (path, exc.strerror or exc)) from None
    if not stat.S_ISREG(info.st_mode):
        raise MatrixTextError("%s: not a regular file (a matrix is a YAML or JSON file)" % path)
    too_big = "%s: larger than %d bytes, the limit for a matrix file (raise it with %s)"
    if info.st_size > max_bytes:
        raise MatrixTextError(too_big % (path, max_bytes, BYTES_ENV))
    try:
        with open(path, "rb") as source:
            data = source.read(max_bytes + 1)
    except OSError as exc:
        raise MatrixTextError("%s: cannot read: %s" % (path, exc.strerror or exc)) from None
    if len(data) > max_bytes:  # it grew since the stat
        raise MatrixTextError(too_big % (path, max_bytes, BYTES_ENV))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MatrixTextError("%s: not UTF-8 text (byte %d)" % (path, exc.start)) from None


def load(text: str, source: str = "<matrix>") -> Any:
    """Parse matrix text: JSON if it is JSON, else YAML (with the checks above)."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            return json.loads(text, object_pairs_hook=_json_object(source))
        except ValueError as exc:
            if isinstance(exc, MatrixTextError):
                raise
    return load_yaml(text, source)[0]


def _json_object(source: str) -> Any:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise MatrixTextError("%s: key %r is given twice in one JSON object" % (source, key))
            out[key] = value
        return out

    return build


def load_yaml(text: str, source: str = "<matrix>") -> tuple[Any, Any]:
    """(data, the composed YAML node) of matrix YAML text, checked before it is constructed."""
    try:
        import yaml  # PyYAML is optional on nodes; JSON always works.
    except ImportError:
        raise MatrixTextError("%s: is not JSON and PyYAML is not installed here" % source) from None
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise MatrixTextError("%s: nested deeper than %d levels" % (source, MAX_DEPTH)) from None
        if node is None:
            return None, None
        _check(node, source, loader)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = "%s:%d" % (source, mark.line + 1) if mark else source
        raise MatrixTextError(
            "%s: not valid YAML: %s" % (where, exc.problem or exc.context or "invalid YAML")
        ) from None
    except yaml.YAMLError as exc:
        raise MatrixTextError("%s: not valid YAML: %s" % (source, exc)) from None
    finally:
        loader.dispose()
    return data, node


def _check(root: Any, source: str, loader: Any) -> None:
    """Count the nodes as aliases expand them, bound the depth, refuse duplicate keys."""
    import yaml

    max_nodes = limit(NODES_ENV, MAX_NODES)
    sizes: dict[int, int] = {}  # id(node) -> its expanded size: an alias costs its size again
    active: set = set()

    def size(node: Any, depth: int) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        line = node.start_mark.line + 1
        if depth > MAX_DEPTH:
            raise MatrixTextError("%s:%d: nested deeper than %d levels" % (source, line, MAX_DEPTH))
        if id(node) in active:
            raise MatrixTextError("%s:%d: an alias refers to the node that contains it" % (source, line))
        active.add(id(node))
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                total += size(item, depth + 1)
                _bound(total, max_nodes, source, line)
        elif isinstance(node, yaml.MappingNode):
            _no_duplicate_keys(node, source, loader)
            for key, value in node.value:
                total += size(key, depth + 1) + size(value, depth + 1)
                _bound(total, max_nodes, source, line)
        active.discard(id(node))
        sizes[id(node)] = total
        return total

    size(root, 0)


def _bound(total: int, max_nodes: int, source: str, line: int) -> None:
    if total > max_nodes:
        raise MatrixTextError(
            "%s:%d: expands to more than %d YAML nodes (aliases count each time they are used), "
            "the limit for a matrix (raise it with %s)" % (source, line, max_nodes, NODES_ENV)
        )


def _no_duplicate_keys(node: Any, source: str, loader: Any) -> None:
    import yaml

    first: dict[Any, int] = {}
    for key_node, _value in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            seen: int | None = first.get(key)
        except TypeError:
            continue
        line = key_node.start_mark.line + 1
        if seen is not None:
            raise MatrixTextError(
                "%s:%d: key %r is given twice in one mapping (lines %d and %d); YAML would keep only "
                "the last" % (source, line, key, seen, line)
            )
        first[key] = line
