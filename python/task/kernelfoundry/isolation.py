"""The candidate's modules out of the test process (``--kf-isolate``; kf passes it to the correctness runs of
candidate variants on the CPU, config ``eval_config.candidate_process``).

Why. In a reference-format task the test process imports the candidate's module (a torch extension built from the
EVOLVE block, or a Python module holding it) and then computes the reference and compares the two — in one
process. Candidate code run there can rewrite what the check uses: a kernel that returned zeros and set
``torch.relu = lambda t: torch.zeros_like(t)`` at import made the reference return zeros too, and bias_relu scored
``correct`` at 3.5x (found 2026-12-05). With this guard the test process (the checker) never runs candidate code:
importing a candidate module gives a stand-in whose functions, classes and objects live in an executor
(kernelfoundry.executor, ``@modules``: no capabilities, a Landlock domain of its own); calls copy their
arguments in and their outputs back, as kernelfoundry.executor's calls do.

Which modules (``candidate_origin``): an extension module (``.so``) from outside the Python installation (the task
directory, torch's extension cache), and a Python source file in the task directory that holds an
``[EVOLVE_START]`` marker — except the test modules themselves (``conftest.py`` and the files pytest was given),
which cannot leave the checker. Each module imported this way gets an executor of its own, so a candidate's
module never shares a process with another module the checker imported (a reference built as an extension).

What crosses (kernelfoundry.executor): tensors (CPU; strides kept) and numpy arrays, numbers, strings, None,
lists, tuples, dicts, torch dtypes and devices; other objects stay in the executor and come back as
``RemoteObject`` stand-ins (call them, read and set their attributes, iterate them, index them, pass them back).
An exception of the callee is raised here as the same builtin type (ValueError, RuntimeError — torch's errors
— AttributeError …) with its message, anything else as kernelfoundry.executor.ExecutorError. Not supported:
autograd through the candidate (outputs come back detached), CUDA tensors (kf isolates CPU runs only), objects
checked with isinstance against the candidate's classes; such a task sets ``eval_config.candidate_process:
test_process``. The global random generators (torch's CPU one, numpy's, ``random``) are shared: a draw in
the executor follows the checker's seed and the checker's next draw follows it (kernelfoundry.rng).

How. ``install(root, test_files)`` wraps ``create_module`` of importlib's ExtensionFileLoader and ``exec_module``
of SourceFileLoader, the two paths every import takes (``import m``, ``importlib.import_module``, and torch's
``spec_from_file_location`` + ``module_from_spec`` for JIT-built extensions), so the stand-in replaces the module
however it is imported. ``report()`` says where the candidate ran, for the result report: ``"executor"``, or
``"test process: …"`` naming why (the EVOLVE block is in a test module; a candidate library was mapped without
an import, by ctypes or torch.ops.load_library).
"""

from __future__ import annotations

import importlib.machinery
import os
import site
import sys
import sysconfig
import types
from typing import Any, Optional

from .executor import Executor, ExecutorError

_MARKER = b"[EVOLVE_START]"

#: The guard's state: the task root, the test files, the install directories, the modules moved out, and the
#: candidate files that run in this process anyway (``report``).
_STATE: dict = {"root": None, "tests": set(), "install": (), "moved": [], "stayed": []}


def _install_dirs() -> tuple:
    """Directories whose extension modules are the Python installation's (never candidate code)."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:  # a virtualenv's old site module
        pass
    return tuple(sorted(os.path.realpath(d) for d in dirs if d))


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def candidate_origin(origin: Optional[str], extension: bool) -> bool:
    """True when the module file `origin` is candidate code that must not run in this process (see the module
    comment)."""
    if not origin or _STATE["root"] is None or os.environ.get("KF_EXECUTOR"):
        return False
    path = os.path.realpath(origin)
    if extension:
        return not any(_under(path, d) for d in _STATE["install"])
    if not _under(path, _STATE["root"]) or os.path.basename(path) == "conftest.py" or path in _STATE["tests"]:
        return False
    try:
        with open(path, "rb") as f:
            return _MARKER in f.read()
    except OSError:
        return False


class RemoteObject:
    """An object that lives in the candidate's executor (see the module comment): calls, attributes, items and
    iteration are requests to it; what comes back is a copy (data) or another RemoteObject."""

    _kf_remote = True
    __slots__ = ("_kf_executor", "_kf_handle", "_kf_type", "_kf_callable")

    def __init__(self, executor: Executor, meta: dict):
        object.__setattr__(self, "_kf_executor", executor)
        object.__setattr__(self, "_kf_handle", int(meta["handle"]))
        object.__setattr__(self, "_kf_type", str(meta.get("type", "object")))
        object.__setattr__(self, "_kf_callable", bool(meta.get("callable")))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # protocol probes (copy, pickle, numpy) are not forwarded
        return _remote_attr(self._kf_executor, self._kf_handle, name)

    def __setattr__(self, name: str, value: Any) -> None:
        ex = self._kf_executor
        taken: list = []
        ex.request("setattr", obj=self._kf_handle, name=name, value=ex._arg_spec(value, taken))  # noqa: SLF001

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._kf_callable:
            raise TypeError(f"'{self._kf_type}' object is not callable")
        return self._kf_executor.invoke(self._kf_handle, args, kwargs)

    def _method(self, name: str, *args: Any) -> Any:
        method = _remote_attr(self._kf_executor, self._kf_handle, name)
        return method(*args)

    def __iter__(self):
        reply = self._kf_executor.request("iter", obj=self._kf_handle)
        return iter(self._kf_executor.output(reply["out"]))

    def __len__(self) -> int:
        return int(self._method("__len__"))

    def __getitem__(self, key: Any) -> Any:
        return self._method("__getitem__", key)

    def __dir__(self) -> list:
        return list(self._kf_executor.request("dir", obj=self._kf_handle)["names"])

    def __repr__(self) -> str:
        return f"<{self._kf_type} in the candidate's process>"


def _remote_attr(executor: Executor, handle: int, name: str) -> Any:
    reply = executor.request("attr", obj=handle, name=name)
    return executor.output(reply["out"])


def _stand_in(executor: Executor, meta: dict) -> RemoteObject:
    """The one RemoteObject of a handle (one object in the executor, one stand-in here: `is` holds)."""
    cache = executor.__dict__.setdefault("_kf_stand_ins", {})
    handle = int(meta["handle"])
    if handle not in cache:
        cache[handle] = RemoteObject(executor, meta)
    return cache[handle]


Executor.make_remote = _stand_in


class RemoteModule(types.ModuleType):
    """The stand-in of a candidate module: its public names (or ``__all__``) are filled in at import (so ``from m
    import *`` and ``from m import f`` work), other names are looked up in the executor."""

    def __getattr__(self, name: str) -> Any:
        host = self.__dict__.get("_kf_module")
        if host is None or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return host(name)


def _start(module: types.ModuleType, spec: Any) -> None:
    """Imports `spec` in an executor of its own and makes `module` its stand-in."""
    cwd = _STATE["root"] or os.getcwd()
    executor = Executor("@modules", cwd=cwd)
    reply = executor.request("import", name=spec.name, origin=spec.origin,
                             search=list(spec.submodule_search_locations or []) or None,
                             sys_path=[p for p in sys.path if isinstance(p, str)])
    handle = int(reply["out"]["handle"])
    module.__class__ = RemoteModule
    module.__dict__["_kf_module"] = lambda name: _remote_attr(executor, handle, name)
    module.__dict__["_kf_executor"] = executor
    names = None
    try:
        names = _remote_attr(executor, handle, "__all__")
    except (AttributeError, ExecutorError):
        pass
    public = names if isinstance(names, (list, tuple)) else [
        n for n in executor.request("dir", obj=handle)["names"] if not n.startswith("_")]
    for name in public:
        reply = executor.request("attr", obj=handle, name=str(name))
        meta = reply["out"]
        if meta.get("kind") == "object" and meta.get("module"):
            continue  # the module's own imports (torch, np) stay there
        module.__dict__[str(name)] = executor.output(meta)
    if names is not None:
        module.__dict__["__all__"] = list(names)
    _STATE["moved"].append(spec.name)


_ORIGINAL: dict = {}


def _create_extension(self: Any, spec: Any) -> Any:
    if candidate_origin(spec.origin, extension=True):
        module = types.ModuleType(spec.name)
        _start(module, spec)
        return module
    return _ORIGINAL["ext_create"](self, spec)


def _exec_extension(self: Any, module: Any) -> None:
    if isinstance(module, RemoteModule):
        return
    _ORIGINAL["ext_exec"](self, module)


def _exec_source(self: Any, module: Any) -> None:
    spec = getattr(module, "__spec__", None)
    if spec is not None and candidate_origin(spec.origin, extension=False):
        _start(module, spec)
        return
    _ORIGINAL["src_exec"](self, module)


def install(root: str, test_files: list) -> None:
    """Moves candidate modules imported from now on into executors (idempotent). `root` is the task directory,
    `test_files` the files pytest collects from (they stay here)."""
    _STATE["root"] = os.path.realpath(root)
    _STATE["tests"] = {os.path.realpath(os.path.join(root, f)) for f in test_files}
    _STATE["install"] = _install_dirs()
    if _ORIGINAL:
        return
    ext, src = importlib.machinery.ExtensionFileLoader, importlib.machinery.SourceFileLoader
    _ORIGINAL.update(ext_create=ext.create_module, ext_exec=ext.exec_module, src_exec=src.exec_module)
    ext.create_module, ext.exec_module, src.exec_module = _create_extension, _exec_extension, _exec_source


def _mapped_candidates() -> list:
    """Candidate-looking libraries mapped into this process (outside the installation, under the task root or
    not): loaded without an import, so they run here."""
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ""
                if path.endswith(".so") or ".so." in os.path.basename(path):
                    real = os.path.realpath(path)
                    if _under(real, _STATE["root"]) and real not in found:
                        found.append(real)
    except OSError:
        pass
    return found


def report() -> Optional[str]:
    """Where the candidate ran in this run (None when the guard is not installed): "executor" or "test process:
    <why>"."""
    if _STATE["root"] is None:
        return None
    why = []
    for path in sorted(_STATE["tests"]):
        try:
            with open(path, "rb") as f:
                if _MARKER in f.read():
                    why.append(f"the EVOLVE block is in the test module {os.path.basename(path)}")
        except OSError:
            pass
    mapped = _mapped_candidates()
    if mapped:
        why.append("loaded without an import: " + ", ".join(os.path.relpath(p, _STATE["root"]) for p in mapped))
    if why:
        return "test process: " + "; ".join(why)
    return "executor" + (f" ({', '.join(_STATE['moved'])})" if _STATE["moved"] else " (no candidate module imported)")
