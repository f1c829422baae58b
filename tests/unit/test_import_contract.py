"""The import contract of the house (issue 22): who may import whom, and no cycles.

Read from the source (the AST of every module, imports inside functions too), so it needs
nothing installed and runs in well under a second:

(a) `plugins/module_utils/**` imports the standard library and other module_utils only: it
    runs under the node's system Python (>= 3.10), where nothing else is installed;
(b) `plugins/modules/**` imports the standard library, ansible's `module_utils` and ours;
(c) the controller (`src/bwtune/**`) never imports a module of `plugins/modules`;
(d) no command module of `src/bwtune/commands/` imports another command module or
    `bwtune.cli` (modules named `_*` are the shared helpers commands may import);
(e) the stand-in (`src/bwtune/standin/**`) never imports the code it doubles or judges:
    the planner's rules, the planner, the gate's prompts, the failure classifier, the
    controller's analysis (regression, report, results store) or its commands;
(f) no import cycle among our modules, counting `bwtune.cli`'s discovery of every
    command module (`pkgutil` + `importlib`) as imports;
(g) one typing dialect in module_utils: builtin generics (`dict[str, Any]`), `X | None`,
    the abstract types from `collections.abc`; from `typing` only what has no builtin
    (`Any`, ...). The node's Python is >= 3.10, where both evaluate at runtime too;
(h) the results store (`src/bwtune/store/**`) is a layer below the commands, the CLI and
    the analysis: it imports the standard library, orjson (the import's fast JSON, used only
    where its bytes equal json's), psycopg (the PostgreSQL driver, for a postgresql:// store),
    module_utils and its own modules only;
(i) the application layer (`src/bwtune/app/**`: the services the commands call) is below
    the commands and the CLI: it imports the store, the analysis, the Ansible layer,
    module_utils and the like, never a module of `bwtune.commands` or `bwtune.cli`, nor
    `argparse` (a command builds the service's typed request from its options);
(j) the Ansible layer (`src/bwtune/ansible_run/**`: playbooks through ansible-runner, their
    events, the inventory) is below the application layer: it never imports a module of
    `bwtune.app`, `bwtune.commands` or `bwtune.cli`;
(k) nothing imports `bwtune.runner`, the Ansible layer's old name (gone since every
    command imports `bwtune.ansible_run`);
(l) module_utils live in private packages by concern (`_contracts`, `_sglang`, ...; none
    loose at the top), in layers (`MODULE_UTILS_LAYERS`): a package imports its own modules
    and packages of the layers below it, never one beside or above it;
(m) the controller imports only the module_utils packages it shares with the node
    (`CONTROLLER_MODULE_UTILS`: the contracts, SGLang's flags and rules, the planner and
    the strategies' budget, facts parsing, the server's argv); the node's machinery
    (processes, the sweep loop, the benchmark client, provisioning) stays on the node.

The self-tests at the end feed synthetic modules through the same checker, so a
wrong-way import is shown to fail.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COLLECTION = "ansible_collections.bwtune.sglang"
MODULE_UTILS = f"{COLLECTION}.plugins.module_utils"
MODULES = f"{COLLECTION}.plugins.modules"
STDLIB = frozenset(sys.stdlib_module_names)

# Known exceptions, each named with its reason. A new one is a decision, not an accident.
# (a) PyYAML is optional on nodes: matrix_yaml imports it inside the functions that read
#     YAML and says "PyYAML is not installed here" without it (JSON always works).
OPTIONAL_NODE_IMPORTS = {(f"{MODULE_UTILS}._plan.matrix_yaml", "yaml")}
# (l) The module_utils packages, bottom layer first.
MODULE_UTILS_LAYERS: tuple[tuple[str, ...], ...] = (
    ("_contracts",),
    ("_sglang", "_bench", "_facts", "_checkpoint"),
    ("_plan", "_provision", "_search", "_server"),
    ("_serving", "_sweep"),
)
MODULE_UTILS_LAYER = {package: rank for rank, layer in enumerate(MODULE_UTILS_LAYERS) for package in layer}
# (m) What the controller may import of module_utils.
CONTROLLER_MODULE_UTILS = ("_contracts", "_sglang", "_plan", "_search", "_facts", "_serving")
# (d) The known debt of commands that reuse another command's code: none left. What they
#     shared (the sweep; the facts playbook and reader; the cost estimate) is the application
#     layer's (`bwtune.app`). A new entry is a decision, not an accident.
COMMAND_IMPORT_DEBT: set[tuple[str, str]] = set()
ANSIBLE_LAYER = "bwtune.ansible_run"
# (g) The names `typing` has that a builtin, `X | None` or `collections.abc` replaces.
OLD_TYPING = frozenset(
    [
        "AbstractSet",
        "AsyncIterable",
        "AsyncIterator",
        "Awaitable",
        "Callable",
        "ChainMap",
        "Collection",
        "Container",
        "Coroutine",
        "Counter",
        "DefaultDict",
        "Deque",
        "Dict",
        "FrozenSet",
        "Generator",
        "Hashable",
        "ItemsView",
        "Iterable",
        "Iterator",
        "KeysView",
        "List",
        "Mapping",
        "MutableMapping",
        "MutableSequence",
        "MutableSet",
        "Optional",
        "OrderedDict",
        "Sequence",
        "Set",
        "Sized",
        "Text",
        "Tuple",
        "Type",
        "Union",
        "ValuesView",
    ]
)
# (ruff converts a file: ruff check --isolated --target-version py310 --select
# UP006,UP007,UP035,UP045 --fix FILE, then --select F401 --fix for the names left unused.)
# (e) What the stand-in must not borrow.
STANDIN_FORBIDDEN = (
    f"{MODULE_UTILS}._sglang.rules",
    f"{MODULE_UTILS}._sglang.rule_model",
    f"{MODULE_UTILS}._sglang.rules_adjust",
    f"{MODULE_UTILS}._sglang.rules_refused",
    f"{MODULE_UTILS}._sglang.rules_hardware",
    f"{MODULE_UTILS}._plan.planner",
    f"{MODULE_UTILS}._bench.correctness",
    f"{MODULE_UTILS}._bench.correctness_prompts",
    f"{MODULE_UTILS}._sglang.failure_classifier",
    "bwtune.regression",
    "bwtune.regression_history",
    "bwtune.regression_outputs",
    "bwtune.report",
    "bwtune.results_db",
    "bwtune.store",
    "bwtune.commands",
    "bwtune.cli",
)


def module_name(path: Path) -> str:
    """The dotted name `path` is imported under (the repo root is the collection)."""
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts[1:]) if rel.parts[0] == "src" else [*COLLECTION.split("."), *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def our_modules() -> dict[str, Path]:
    found = {}
    for top in ("src/bwtune", "plugins"):
        for path in sorted((REPO / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[module_name(path)] = path
    return found


@functools.cache
def _tree(source: str) -> ast.Module:
    return ast.parse(source)  # each file once: the flag catalog is 10,000 lines


def _statements(tree: ast.AST) -> Iterable[ast.AST]:
    """Every statement, nested ones too (an import is a statement: expressions, such as the
    flag catalog's big literals, are not walked)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo += [
            child
            for child in ast.iter_child_nodes(node)
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case))
        ]


def imports(source: str, ours: Iterable[str]) -> list[tuple[str, int]]:
    """(imported module, line) for every import in `source`: `from a import b` is `a.b`
    when that is one of `ours` (a module), else `a`."""
    known = set(ours)
    found = []
    for node in _statements(_tree(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append(("." * node.level + (node.module or ""), node.lineno))
                continue
            base = node.module or ""
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((full if full in known else base, node.lineno))
    return found


def _is_under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _stdlib(name: str) -> bool:
    return name.split(".")[0] in STDLIB


def _command(name: str) -> bool:
    """A command module (not the package, not a `_` helper)."""
    return (
        _is_under(name, "bwtune.commands")
        and name.count(".") == 2
        and not name.split(".")[-1].startswith("_")
    )


def module_utils_package(name: str) -> str | None:
    """The private package of a module_utils module (`_sglang` for `..._sglang.rules`), "" when loose."""
    if not _is_under(name, MODULE_UTILS) or name == MODULE_UTILS:
        return None
    parts = name[len(MODULE_UTILS) + 1 :].split(".")
    return parts[0] if len(parts) > 1 or parts[0] in MODULE_UTILS_LAYER else ""


def _module_utils_layering(module: str, target: str) -> str | None:
    """Why `module` (in module_utils) may not import `target` (in module_utils), or None (rule l)."""
    own, theirs = module_utils_package(module), module_utils_package(target)
    if own == "" or own not in MODULE_UTILS_LAYER:
        return "every module_utils module lives in a package of MODULE_UTILS_LAYERS"
    if theirs is None or theirs == own:
        return None
    if theirs not in MODULE_UTILS_LAYER:
        return f"{target} is in no package of MODULE_UTILS_LAYERS"
    if MODULE_UTILS_LAYER[theirs] >= MODULE_UTILS_LAYER[own]:
        return f"{own} imports only the packages of the layers below it, not {theirs}"
    return None


def violations(module: str, source: str, ours: Iterable[str]) -> list[str]:
    """One line per import of `module` (its `source`) that breaks rules (a) to (e) or (h) to (k)."""
    bad = []
    for target, line in imports(source, ours):
        where = f"{module}:{line} imports {target}"
        if target.startswith("."):
            bad.append(f"{where}: relative import (Ansible loads module_utils by their full name)")
        elif _is_under(module, MODULE_UTILS):
            if not (_stdlib(target) or _is_under(target, MODULE_UTILS)) and (module, target) not in (
                OPTIONAL_NODE_IMPORTS
            ):
                bad.append(f"{where}: module_utils import the standard library and module_utils only")
            elif _is_under(target, MODULE_UTILS) and (why := _module_utils_layering(module, target)):
                bad.append(f"{where}: {why}")
        elif _is_under(module, MODULES):
            if not (
                _stdlib(target)
                or _is_under(target, "ansible.module_utils")
                or _is_under(target, MODULE_UTILS)
            ):
                bad.append(f"{where}: modules import the standard library and module_utils only")
        elif _is_under(module, "bwtune"):
            if _is_under(target, MODULES):
                bad.append(f"{where}: the controller never imports a module of plugins/modules")
            package = module_utils_package(target)
            if package is not None and package not in CONTROLLER_MODULE_UTILS:
                bad.append(
                    f"{where}: the controller imports only the module_utils of CONTROLLER_MODULE_UTILS"
                )
            if _command(module) and target != module:
                if target == "bwtune.cli":
                    bad.append(f"{where}: a command never imports the CLI that discovers it")
                elif _command(target) and (module, target) not in COMMAND_IMPORT_DEBT:
                    bad.append(f"{where}: a command never imports another command")
            if _is_under(module, "bwtune.store") and not (
                _stdlib(target)
                or target == "orjson"
                or _is_under(target, "psycopg")
                or _is_under(target, MODULE_UTILS)
                or _is_under(target, "bwtune.store")
            ):
                bad.append(
                    f"{where}: the store imports the standard library, orjson, psycopg, module_utils, itself"
                )
            if _is_under(module, "bwtune.app") and (
                _is_under(target, "bwtune.commands") or _is_under(target, "bwtune.cli")
            ):
                bad.append(f"{where}: the application layer never imports a command or the CLI")
            if _is_under(module, "bwtune.app") and _is_under(target, "argparse"):
                bad.append(f"{where}: the application layer takes typed requests, never argparse")
            if _is_under(module, ANSIBLE_LAYER) and any(
                _is_under(target, above) for above in ("bwtune.app", "bwtune.commands", "bwtune.cli")
            ):
                bad.append(
                    f"{where}: the Ansible layer never imports the application layer, a command or the CLI"
                )
            if target == "bwtune.runner":
                bad.append(
                    f"{where}: the Ansible layer is bwtune.ansible_run (bwtune.runner is its old name)"
                )
            if _is_under(module, "bwtune.standin"):
                for forbidden in STANDIN_FORBIDDEN:
                    if _is_under(target, forbidden):
                        bad.append(f"{where}: the stand-in never borrows the code it doubles or judges")
    return bad


def old_typing(source: str) -> list[str]:
    """The names `source` imports from `typing` that (g) replaces."""
    return sorted(
        alias.name
        for node in _statements(_tree(source))
        if isinstance(node, ast.ImportFrom) and node.module == "typing"
        for alias in node.names
        if alias.name in OLD_TYPING
    )


def graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    """Our modules and the ones of ours each imports, `bwtune.cli` importing every command."""
    edges = {
        module: {t for t, _ in imports(src, sources) if t in sources and t != module}
        for module, src in sources.items()
    }
    if "bwtune.cli" in edges:
        edges["bwtune.cli"] |= {
            m for m in sources if _is_under(m, "bwtune.commands") and m != "bwtune.commands"
        }
    return edges


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    return {name: path.read_text(encoding="utf-8") for name, path in our_modules().items()}


def test_every_module_utils_package_is_in_a_layer_and_none_is_empty(sources: dict[str, str]) -> None:
    packages = {module_utils_package(name) for name in sources} - {None}
    assert packages == set(MODULE_UTILS_LAYER)


def test_every_layer_is_found(sources: dict[str, str]) -> None:
    assert f"{MODULE_UTILS}._sglang.rules" in sources and f"{MODULES}.sweep" in sources
    assert "bwtune.cli" in sources and "bwtune.commands.sweep_command" in sources
    assert "bwtune.standin.app" in sources
    assert "bwtune.store.views" in sources and "bwtune.store" in sources
    assert "bwtune.app.sweep_service" in sources
    assert "bwtune.ansible_run.playbooks" in sources and "bwtune.ansible_run" in sources


def test_every_module_keeps_the_import_contract(sources: dict[str, str]) -> None:
    bad = [line for module, src in sorted(sources.items()) for line in violations(module, src, sources)]
    assert bad == []


def test_the_known_debt_is_still_there(sources: dict[str, str]) -> None:
    """An entry of an allow-list that is no longer needed is removed, so the list stays true."""
    edges = graph(sources)
    assert sorted(pair for pair in COMMAND_IMPORT_DEBT if pair[1] not in edges[pair[0]]) == []
    unused = [
        pair
        for pair in OPTIONAL_NODE_IMPORTS
        if pair[1] not in {t for t, _ in imports(sources[pair[0]], sources)}
    ]
    assert unused == []


def test_no_import_cycle_among_our_modules(sources: dict[str, str]) -> None:
    assert cycles(graph(sources)) == []


def test_module_utils_write_one_typing_dialect(sources: dict[str, str]) -> None:
    found = {module: old_typing(src) for module, src in sources.items() if _is_under(module, MODULE_UTILS)}
    assert {module: names for module, names in found.items() if names} == {}


def test_the_old_typing_dialect_is_seen() -> None:
    assert old_typing("from typing import Any, Dict, Optional\n") == ["Dict", "Optional"]
    assert old_typing("def f():\n    from typing import List\n") == ["List"]
    assert old_typing("from typing import Any, cast\nfrom collections.abc import Sequence\n") == []


# ---------------------------------------------------------------- the checker checked

OURS = {
    f"{MODULE_UTILS}._sglang.rules",
    f"{MODULE_UTILS}._contracts.results_fields",
    f"{MODULE_UTILS}._sweep.sweep_runner",
    f"{MODULE_UTILS}._server.server_process",
    f"{MODULE_UTILS}.loose",
    f"{MODULE_UTILS}._sglang.versions",
    f"{MODULES}.sweep",
    "bwtune.cli",
    "bwtune.runner",
    "bwtune.commands",
    "bwtune.commands.sweep",
    "bwtune.commands.plan",
    "bwtune.commands.runs",
    "bwtune.commands._playbook_options",
    "bwtune.standin.app",
    "bwtune.regression",
    "bwtune.store",
    "bwtune.store.lines",
    "bwtune.app",
    "bwtune.app.sweep_service",
    "bwtune.app.sweep_inputs",
    "bwtune.ansible_run",
    "bwtune.ansible_run.playbooks",
    "bwtune.ansible_run.events",
    "bwtune.collection",
}


@pytest.mark.parametrize(
    ("module", "source"),
    [
        (f"{MODULE_UTILS}._sglang.versions", "import yaml\n"),
        (f"{MODULE_UTILS}._sglang.versions", "def f():\n    import requests\n"),
        (f"{MODULE_UTILS}._sglang.versions", "from ansible.module_utils.basic import AnsibleModule\n"),
        (f"{MODULE_UTILS}._sglang.versions", "from bwtune import runner\n"),
        (f"{MODULE_UTILS}._sglang.versions", "from . import rules\n"),
        # (l): a layer imports only the layers below it, and nothing is loose.
        (f"{MODULE_UTILS}._contracts.results_fields", f"from {MODULE_UTILS}._sglang import rules\n"),
        (f"{MODULE_UTILS}._server.server_process", f"from {MODULE_UTILS}._sweep import sweep_runner\n"),
        (f"{MODULE_UTILS}._sglang.versions", f"import {MODULE_UTILS}._server.server_process\n"),
        (f"{MODULE_UTILS}.loose", f"from {MODULE_UTILS}._sglang import rules\n"),
        # (m): the node's machinery stays on the node.
        ("bwtune.store.lines", f"from {MODULE_UTILS}._sweep import sweep_runner\n"),
        ("bwtune.app.sweep_service", f"def f():\n    import {MODULE_UTILS}._server.server_process\n"),
        (f"{MODULES}.sweep", "import yaml\n"),
        (f"{MODULES}.sweep", "from bwtune.commands import sweep\n"),
        ("bwtune.ansible_run", f"from {MODULES} import sweep\n"),
        ("bwtune.ansible_run", f"import {MODULES}.sweep\n"),
        ("bwtune.commands.runs", "from bwtune.commands import sweep\n"),
        ("bwtune.commands.runs", "import bwtune.commands.plan\n"),
        ("bwtune.commands.runs", "def run(args):\n    from bwtune.cli import build_parser\n"),
        ("bwtune.standin.app", f"from {MODULE_UTILS}._sglang import rules\n"),
        ("bwtune.standin.app", f"from {MODULE_UTILS}._plan.planner import plan\n"),
        ("bwtune.standin.app", "from bwtune import regression\n"),
        ("bwtune.standin.app", "from bwtune.store import lines\n"),
        ("bwtune.store.lines", "from bwtune.commands import sweep\n"),
        ("bwtune.store.lines", "def f():\n    from bwtune.cli import main\n"),
        ("bwtune.store.lines", "from bwtune import regression\n"),
        ("bwtune.store.lines", "import yaml\n"),
        ("bwtune.commands.runs", "import bwtune.commands.sweep\n"),  # the sweep debt is paid
        ("bwtune.commands.regress", "from bwtune.commands import sweep\n"),
        ("bwtune.commands.regress", "from bwtune.commands import plan\n"),
        ("bwtune.app.sweep_service", "from bwtune.commands import sweep\n"),
        ("bwtune.app.sweep_service", "from bwtune.commands import _playbook_options\n"),
        ("bwtune.app.sweep_service", "def f():\n    from bwtune.cli import main\n"),
        ("bwtune.app.sweep_inputs", "import argparse\n"),
        ("bwtune.app.sweep_service", "from argparse import Namespace\n"),
        ("bwtune.ansible_run.playbooks", "from bwtune.app import sweep_service\n"),
        ("bwtune.ansible_run.playbooks", "from bwtune.commands import _playbook_options\n"),
        ("bwtune.ansible_run.events", "def f():\n    import bwtune.cli\n"),
        ("bwtune.ansible_run", "from bwtune.commands import sweep\n"),
        ("bwtune.commands.runs", "from bwtune import runner\n"),
        ("bwtune.commands.promote", "from bwtune import runner\n"),
        ("bwtune.app.sweep_service", "import bwtune.runner\n"),
    ],
)
def test_a_wrong_way_import_is_refused(module: str, source: str) -> None:
    assert len(violations(module, source, OURS)) == 1


@pytest.mark.parametrize(
    ("module", "source"),
    [
        (f"{MODULE_UTILS}._sglang.rules", f"import json\nfrom {MODULE_UTILS}._sglang import versions\n"),
        (
            f"{MODULES}.sweep",
            "from ansible.module_utils.basic import AnsibleModule\n"
            f"from {MODULE_UTILS}._sglang import rules\n",
        ),
        ("bwtune.ansible_run", f"import yaml\nfrom {MODULE_UTILS}._sglang import rules\n"),
        (
            "bwtune.commands.runs",
            "from bwtune.commands import _playbook_options\nfrom bwtune import ansible_run\n",
        ),
        ("bwtune.commands.runs", "from bwtune.app import sweep_service\n"),
        (
            "bwtune.app.sweep_service",
            f"from bwtune import ansible_run, store, regression\nfrom {MODULE_UTILS}._sglang import rules\n",
        ),
        ("bwtune.standin.app", f"from {MODULE_UTILS}._sglang import versions\n"),
        (
            "bwtune.ansible_run.playbooks",
            "import ansible_runner\nfrom bwtune import collection, store\n"
            "from bwtune.ansible_run import events\n",
        ),
        (
            "bwtune.app.sweep_inputs",
            "from bwtune import ansible_run, store\nfrom bwtune.ansible_run import Inventory\n",
        ),
        ("bwtune.commands.sweep", "import argparse\nfrom bwtune.app import sweep_service\n"),
        (
            "bwtune.store",
            f"import sqlite3\nfrom {MODULE_UTILS}._sglang import rules\nfrom bwtune.store import lines\n",
        ),
        ("bwtune.store.lines", "import json\n\nimport orjson\n"),
        ("bwtune.store.postgres", "def connect():\n    import psycopg\n    from psycopg import sql\n"),
        (f"{MODULE_UTILS}._sweep.sweep_runner", f"from {MODULE_UTILS}._server import server_process\n"),
        (f"{MODULE_UTILS}._sweep.sweep_runner", f"from {MODULE_UTILS}._contracts import results_fields\n"),
        ("bwtune.store.lines", f"from {MODULE_UTILS}._contracts import results_fields\n"),
    ],
)
def test_a_right_way_import_passes(module: str, source: str) -> None:
    assert violations(module, source, OURS | {"bwtune.commands.regress"}) == []


def test_a_cycle_is_found_and_the_cli_discovers_its_commands() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    # A command that imports the CLI is a cycle through the CLI's discovery of it.
    edges = graph(
        {
            "bwtune.cli": "from bwtune import commands\n",
            "bwtune.commands": "",
            "bwtune.commands.x": "import bwtune.cli\n",
        }
    )
    assert cycles(edges) == [["bwtune.cli", "bwtune.commands.x"]]
