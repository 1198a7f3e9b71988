"""KernelFoundry task-side package: what a task package's ``task.py`` and ``conftest.py`` import.

- ``TestBase``: base class of a task's test class; its ``build`` / ``build_reference`` hooks are called by
  ``python -m kernelfoundry.build_target`` and return the list of artifact paths (default: None = no build).
- ``kernelfoundry.conftest``: the pytest plugin (``from kernelfoundry.conftest import *``).
- ``kernelfoundry.testing``: correctness helpers; ``kernelfoundry.measure``: runtime measurement.

Importing this package must stay cheap (no torch import): it is loaded by every task run.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from .compiler import compile_torch_extension

__all__ = ["TestBase", "CustomTest", "compile_torch_extension", "__version__"]

__version__ = "0.1.0"


class TestBase:
    """Base of a task's pytest class. Subclass it in ``task.py``; pytest collects the subclass's ``test_*``
    methods. Override ``build`` (candidate) and/or ``build_reference`` to compile kernels; each returns a
    list of artifact paths inside the task tree (absolute, or relative to the task directory) or None."""

    def build(self, gpu_arch: str, **buildtime_params: Any) -> Optional[list]:
        """Builds the candidate for ``gpu_arch`` with the task's buildtime hyperparameters. Default: no build."""
        return None

    def build_reference(self, gpu_arch: str, **buildtime_params: Any) -> Optional[list]:
        """Builds the reference implementation. Default: no build."""
        return None

    def compile_torch_extension(self, extension_name: str, src: Union[str, Any, Sequence[Any]], output_dir: Any,
                                gpu_arch: str, timeout: Optional[float] = None, backend: str = "torch",
                                extra_cflags: Optional[Sequence[str]] = None,
                                extra_ldflags: Optional[Sequence[str]] = None) -> list[str]:
        """See kernelfoundry.compiler.compile_torch_extension: builds and returns
        ``[<abs output_dir>/<extension_name>.so]``; raises RuntimeError with the compiler output (BuildTimeout
        when a time limit fired). ``timeout`` None = the task's remaining build budget under kf."""
        return compile_torch_extension(extension_name=extension_name, src=src, output_dir=output_dir,
                                       gpu_arch=gpu_arch, timeout=timeout, backend=backend,
                                       extra_cflags=extra_cflags, extra_ldflags=extra_ldflags)


#: Legacy name of TestBase kept for old task packages; never picked as the task's own class.
CustomTest = TestBase
