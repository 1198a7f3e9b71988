"""The reference's compiler classes (``kernelfoundry.compiler.TorchCompiler`` / ``IcpxCompiler``; chosen by
``eval_config.kernel_compiler``), over kf's build machinery in kernelfoundry.compiler: the build runs in a child
process whose whole tree a time limit kills, under the task's build budget when kf runs it.

``compile()`` returns the reference's status dict: ``{"stdout", "stderr", "returncode", "phase"}``. ``phase`` is
``TorchCompiler.failed_phase(returncode)``: None on success, "load" when the sources compiled but the module
would not import (exit ``LOAD_FAILED_RETURNCODE`` = 87), "compile" for anything else. kf's build child merges
the compiler's two streams (streamed to the log as they arrive when ``verbose``): ``stdout`` is that merged
output, ``stderr`` is empty on success and says what failed otherwise. A time limit gives returncode -9 and
"Compilation timed out" in ``stderr``. The built module is ``<build_dir>/<extension_name>.so``.
"""

from __future__ import annotations

import importlib.machinery
import os
import signal
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Optional, Sequence, Union

from . import compiler as _c

__all__ = ["BaseKernelCompiler", "TorchCompiler", "IcpxCompiler", "find_built_extension", "extension_suffix"]

PathLike = Union[str, os.PathLike]


def extension_suffix() -> str:
    """The file suffix of a loadable Python extension module here (``.so`` on Linux)."""
    return importlib.machinery.EXTENSION_SUFFIXES[-1]


def find_built_extension(build_dir: PathLike, extension_name: str) -> Path:
    """The extension module a build left in ``build_dir`` (``<name>.so``, or another extension-module suffix).
    Raises FileNotFoundError naming the directory's contents when there is none."""
    root = Path(build_dir)
    for suffix in reversed(importlib.machinery.EXTENSION_SUFFIXES):
        candidate = root / f"{extension_name}{suffix}"
        if candidate.exists():
            return candidate
    contents = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
    raise FileNotFoundError(f"no extension module for '{extension_name}' in {root} (looked for the suffixes "
                            f"{importlib.machinery.EXTENSION_SUFFIXES}); the directory holds: "
                            f"{contents or '(nothing)'}")


def _sources(src: Union[PathLike, Sequence[PathLike]]) -> list[Path]:
    raw = [src] if isinstance(src, (str, os.PathLike)) else list(src)
    return [Path(s).resolve() for s in raw]


class BaseKernelCompiler(ABC):
    """A compiler for one extension: ``extension_name`` (a Python identifier), ``src`` (a source path or a list),
    ``build_dir`` (created; the module is built there), ``gpu_arch`` (exported as TORCH_CUDA_ARCH_LIST /
    TORCH_XPU_ARCH_LIST unless "cpu"/"native"/empty), ``timeout`` (seconds for the build; kf's build budget caps
    it), ``verbose`` (stream the compiler's output to stdout while it runs). ``extra_cflags`` (kf: default
    ``["-O3"]``) and ``extra_ldflags`` are passed on."""

    def __init__(self, extension_name: str, src: Union[PathLike, Sequence[PathLike]], build_dir: PathLike,
                 gpu_arch: str, timeout: Optional[float] = 120, verbose: bool = False, *,
                 extra_cflags: Optional[Sequence[str]] = None, extra_ldflags: Optional[Sequence[str]] = None):
        self.extension_name = extension_name
        self.src = src
        self.build_dir = build_dir
        self.gpu_arch = gpu_arch
        self.timeout = timeout
        self.verbose = verbose
        self.extra_cflags = extra_cflags
        self.extra_ldflags = extra_ldflags
        Path(self.build_dir).mkdir(parents=True, exist_ok=True)

    @abstractmethod
    def compile(self) -> dict:
        """Builds the extension into build_dir; returns {"stdout", "stderr", "returncode", "phase"}."""

    def _flags(self) -> list[str]:
        cflags = ["-O3"] if self.extra_cflags is None else [str(f) for f in self.extra_cflags]
        return cflags + [_c._LDFLAG_PREFIX + str(f) for f in (self.extra_ldflags or [])]

    def _limit(self) -> tuple[float, str, float]:
        return _c._effective_timeout(None if self.timeout is None else float(self.timeout))

    def _status(self, returncode: int, stdout: str, stderr: str) -> dict:
        return {"stdout": stdout, "stderr": stderr, "returncode": int(returncode),
                "phase": TorchCompiler.failed_phase(int(returncode))}

    def _timed_out(self, e: Exception, stdout: str = "") -> dict:
        return self._status(-int(signal.SIGKILL), stdout, f"Compilation timed out: {e}")


class TorchCompiler(BaseKernelCompiler):
    """Builds a torch extension with ``torch.utils.cpp_extension.load`` (CPU or CUDA sources; the default of
    ``eval_config.kernel_compiler``)."""

    #: Exit code of the build child when the sources compiled but the module would not import; distinct from
    #: every ordinary failure code (1, 2) so that the two failures can be told apart.
    LOAD_FAILED_RETURNCODE = _c.LOAD_FAILED_EXIT

    @classmethod
    def failed_phase(cls, returncode: int) -> Optional[str]:
        """Which phase failed: None for 0, "load" for LOAD_FAILED_RETURNCODE, "compile" for anything else."""
        if returncode == 0:
            return None
        return "load" if returncode == cls.LOAD_FAILED_RETURNCODE else "compile"

    def compile(self) -> dict:
        if not self.extension_name.isidentifier():
            return self._status(1, "", f"extension_name {self.extension_name!r} is not a Python identifier")
        sources = _sources(self.src)
        missing = [str(s) for s in sources if not s.is_file()]
        if missing:
            return self._status(1, "", f"source file(s) not found: {', '.join(missing)}")
        seconds, limit, limit_s = self._limit()
        try:
            rc, out = _c._torch_build_rc(self.extension_name, sources, Path(self.build_dir).resolve(), self._flags(),
                                         "" if self.gpu_arch is None else str(self.gpu_arch), seconds, limit,
                                         limit_s, echo=self.verbose)
        except _c.BuildTimeout as e:
            return self._timed_out(e)
        if rc == 0:
            try:
                find_built_extension(self.build_dir, self.extension_name)
            except FileNotFoundError as e:
                return self._status(1, out, str(e))
            return self._status(0, out, "")
        what = ("the sources compiled but the module would not import" if rc == self.LOAD_FAILED_RETURNCODE
                else "compilation failed")
        return self._status(rc, out, f"{what} (exit {rc})")


class IcpxCompiler(BaseKernelCompiler):
    """Builds a SYCL extension with Intel's icpx: compile, device link, link against torch."""

    def compile(self) -> dict:
        seconds, limit, limit_s = self._limit()
        try:
            _c._build_icpx(self.extension_name, _sources(self.src), Path(self.build_dir).resolve(), self._flags(),
                           "" if self.gpu_arch is None else str(self.gpu_arch), seconds, limit, limit_s,
                           echo=self.verbose)
        except _c.BuildTimeout as e:
            return self._timed_out(e)
        except (RuntimeError, OSError, ImportError) as e:
            return self._status(1, "", str(e))
        return self._status(0, "", "")
