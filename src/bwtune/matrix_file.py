"""Read a matrix YAML file and keep where each key came from, so errors can name the line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._plan import matrix_source, matrix_yaml

KeyPath = tuple[Any, ...]


class MatrixFileError(ValueError):
    """The file cannot be read or is not YAML; the message already names the file (and line)."""


@dataclass
class MatrixFile:
    path: Path
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)  # key path -> 1-based line

    def line_of(self, key_path: KeyPath) -> int | None:
        """The line of the value at `key_path`, or of its nearest ancestor the file has."""
        for end in range(len(key_path), -1, -1):
            line = self.lines.get(tuple(key_path[:end]))
            if line is not None:
                return line
        return None

    def where(self, key_path: KeyPath) -> str:
        """`examples/x.yml:12` for a key path."""
        line = self.line_of(key_path)
        return f"{self.path}:{line}" if line else str(self.path)


def load(path: str | Path) -> MatrixFile:
    path = Path(path)
    try:
        # Found, and its relative model.path resolved, by the rule plain Ansible uses too.
        found = Path(matrix_source.locate(str(path)))
        # A regular file within the size limit, or refused before it is read (matrix_yaml).
        text = matrix_yaml.read_text(str(found))
    except (matrix_source.MatrixSourceError, matrix_yaml.MatrixTextError) as err:
        raise MatrixFileError(str(err)) from None
    matrix = loads(text, path)
    matrix.data = matrix_source.resolve_model_path(matrix.data, str(found))
    return matrix


def loads(text: str, path: str | Path = "<matrix>") -> MatrixFile:
    path = Path(path)
    try:
        # Duplicate keys, alias expansion and depth are checked before anything is built.
        data, node = matrix_yaml.load_yaml(text, str(path))
    except matrix_yaml.MatrixTextError as err:
        raise MatrixFileError(str(err)) from None
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _index(node, (), lines)
    return MatrixFile(path, data, lines)


def _index(node: yaml.Node, key_path: KeyPath, lines: dict[KeyPath, int]) -> None:
    lines[key_path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        constructor = yaml.SafeLoader("")
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = constructor.construct_object(key_node, deep=True)
            _index(value_node, (*key_path, key), lines)
            # The key's own line: a block value starts on the line after its key.
            lines[(*key_path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, (*key_path, i), lines)
