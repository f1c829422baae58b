"""Import-only stand-in for a package that SGLang imports but never calls while it
processes arguments: sgl_kernel (a CUDA extension) and torchvision (PyPI's wheels do
not load beside the CPU torch wheel).

make_venv.sh copies this file to site-packages/<package>/__init__.py. Every attribute
and every submodule of the package is a placeholder that fails loudly if called.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

__version__ = "0.0.0+bwtune.stub"


class _Placeholder:
    """Any attribute of the stubbed package: importable, not callable for real."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> _Placeholder:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"import stub: {self._name} called (not installed in the oracle venv)")

    def __repr__(self) -> str:
        return f"<import stub {self._name}>"


class _StubModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self.__name__}.{attr}")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves every submodule of the stubbed package as a stub package."""

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


sys.meta_path.insert(0, _StubFinder())
sys.modules[__name__].__class__ = _StubModule
