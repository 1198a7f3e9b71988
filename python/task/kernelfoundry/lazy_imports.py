"""Deferred imports of heavy packages while tests are only collected (``python -m kernelfoundry.collect``).

Collecting a task's tests imports its ``task.py``, and nearly every ``task.py`` starts with ``import torch``
— 1.5 to 6 s of a 2-core machine, spent although collection rarely touches torch. While collecting, a
``LazyImporter`` on ``sys.meta_path`` makes ``import torch`` (or numpy, …) bind a module object whose code has
not run yet. The first real use of the module (any attribute that is not already there: ``torch.float32``,
``torch.cuda.is_available()``, ``from torch import nn``, ``import torch.nn``) runs the package's own code into
that same object — the one ``sys.modules`` and every importer hold — so the program sees the same module it
would have seen, only later. This is the standard library's ``importlib.util.LazyLoader`` idea, with two
differences that make it useful under pytest:

* the load is triggered by *missing* attributes (``__getattr__``), not by every attribute access, so
  ``isinstance(obj, type)`` and ``obj.__class__`` — which pytest applies to every global of ``task.py`` — do
  not load the package;
* the attribute probes pytest applies to every global (``PYTEST_PROBES``: fixture markers, ``__test__``,
  ``__bases__`` of ``issubclass``) answer "absent" without loading. No real package module defines them.

Submodule imports of a deferred package (``import torch.nn``) load the package first and then hand the
import system the submodule the package's own initialisation created, so nothing is executed twice.

Annotations: ``def reference(x: torch.Tensor) -> torch.Tensor`` would use torch at import. While collecting,
the task's own modules (``.py`` files under the task directory: task.py, conftest.py, kernel.py, …) are
compiled with postponed evaluation of annotations (PEP 563, as if they began with ``from __future__ import
annotations``), so annotations stay strings. Collection never evaluates annotations; code that does
(``typing.get_type_hints``) resolves the strings and loads what it needs.

Only for collection: a test run imports everything normally. Names not installed stay ordinary imports
(an ImportError is raised exactly where it would be).
"""

from __future__ import annotations

import __future__

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Iterable, Optional, Union

__all__ = ["DEFAULT_PACKAGES", "PYTEST_PROBES", "LazyImporter", "TaskSourceFinder", "install", "is_deferred",
           "loaded"]

#: Packages whose import is deferred during collection (the slow ones task files import at the top).
DEFAULT_PACKAGES = ("torch", "numpy", "triton", "scipy", "pandas", "cupy", "jax", "tensorflow",
                    "intel_extension_for_pytorch", "dpctl", "dpnp", "pyopencl")

#: Attributes pytest reads from every module-level object during collection; answered "absent" without
#: loading the package (pytest 7/8: fixture markers in parsefactories, ``__test__`` in istestclass/
#: istestfunction, ``__bases__`` through issubclass in the unittest plugin, ``__wrapped__`` in unwrap).
PYTEST_PROBES = frozenset({"_pytestfixturefunction", "_fixture_function_marker", "__test__", "__bases__",
                           "__wrapped__", "_pytestfixturedef", "__pytest_wrapped__", "pytestmark",
                           "__unittest_skip__", "_is_coroutine", "_is_coroutine_marker", "__code__",
                           "__func__", "__self__", "__call__", "__origin__"})


class _DeferredModule(types.ModuleType):
    """A package module whose code has not run yet; becomes the real module on first use."""

    def __getattr__(self, name: str):
        if name in PYTEST_PROBES:
            raise AttributeError(name)
        _load(self)
        return getattr(self, name)


def _load(module: types.ModuleType) -> None:
    """Runs the package's code into `module` (the object everyone already holds)."""
    if type(module) is not _DeferredModule:
        return
    spec = module.__spec__
    loader = module.__dict__.pop("_kf_real_loader")
    module.__class__ = types.ModuleType
    spec.loader = loader
    module.__loader__ = loader
    spec._initializing = True
    try:
        loader.exec_module(module)
    except BaseException:
        # As a failed normal import: the module is not left half-initialised in sys.modules.
        if sys.modules.get(spec.name) is module:
            del sys.modules[spec.name]
        raise
    finally:
        spec._initializing = False


class _DeferLoader(importlib.abc.Loader):
    """Creates the module as the real loader would, but runs its code only on first use."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec) if hasattr(self.real, "create_module") else None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["_kf_real_loader"] = self.real
        module.__class__ = _DeferredModule


class _ExistingLoader(importlib.abc.Loader):
    """Hands the import system a submodule that already exists (made while its package loaded)."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set ours; give back the module's own


class LazyImporter(importlib.abc.MetaPathFinder):
    """Meta path finder deferring the top-level import of `packages` (see the module docstring)."""

    def __init__(self, packages: Iterable[str] = DEFAULT_PACKAGES) -> None:
        self.packages = frozenset(packages)

    def find_spec(self, name: str, path=None, target=None) -> Optional[importlib.machinery.ModuleSpec]:
        root = name.partition(".")[0]
        if root not in self.packages:
            return None
        if name != root:
            parent = sys.modules.get(root)
            if parent is None or type(parent) is not _DeferredModule:
                return None
            _load(parent)  # a submodule needs its package initialised first
            existing = sys.modules.get(name)
            if existing is None:
                return None  # not made by the package's own initialisation: import it normally
            # The import system, seeing the submodule appear in sys.modules meanwhile, continues with the
            # module's own __spec__ (importlib._bootstrap._find_spec) and would run its code again: it gets
            # our spec there, whose loader hands back the module and restores its real spec.
            spec = importlib.util.spec_from_loader(name, _ExistingLoader(existing),
                                                   is_package=hasattr(existing, "__path__"))
            existing.__spec__ = spec
            return spec
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec  # namespace packages and legacy loaders: import normally
        spec.loader = _DeferLoader(spec.loader)
        return spec


class _PostponedAnnotationsLoader(importlib.machinery.SourceFileLoader):
    """Compiles a source file as if it began with ``from __future__ import annotations`` (never from or to
    a bytecode cache: the code differs from a normal import's)."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        source = self.get_data(path)
        return compile(source, path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)


class TaskSourceFinder(importlib.abc.MetaPathFinder):
    """Meta path finder giving the modules under `root` the _PostponedAnnotationsLoader."""

    def __init__(self, root: Union[str, os.PathLike]) -> None:
        self.root = os.path.realpath(root) + os.sep

    def find_spec(self, name: str, path=None, target=None) -> Optional[importlib.machinery.ModuleSpec]:
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        if not spec.origin or not os.path.realpath(spec.origin).startswith(self.root):
            return None
        spec.loader = _PostponedAnnotationsLoader(name, spec.origin)
        return spec


def install(packages: Iterable[str] = DEFAULT_PACKAGES,
            task_dir: Optional[Union[str, os.PathLike]] = None) -> LazyImporter:
    """Puts a LazyImporter first on sys.meta_path (and, with `task_dir`, a TaskSourceFinder for the task's
    own modules right after it) and returns the LazyImporter."""
    importer = LazyImporter(packages)
    if task_dir is not None:
        sys.meta_path.insert(0, TaskSourceFinder(task_dir))
    sys.meta_path.insert(0, importer)
    return importer


def is_deferred(module: object) -> bool:
    """True for a module whose code has not run yet."""
    return type(module) is _DeferredModule


def loaded(name: str) -> bool:
    """True when package `name` has been imported and its code has run."""
    module = sys.modules.get(name)
    return module is not None and not is_deferred(module)
