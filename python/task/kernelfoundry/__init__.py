"""KernelFoundry task-side package: what a task package's ``task.py`` and ``conftest.py`` import.

Split by trust (python/README.md has the table of every module and where it runs): this directory (built as
``<build>/python-task``, installed as ``<prefix>/share/kernelfoundry/python-task``) holds only what runs inside a
contained task run — the test process, build children, executors, the warm-start client — and is the only one
on a candidate's PYTHONPATH. Host-side modules (the warm-start zygote, the PCH builder, the compiled core and the
Python API of ``kernelfoundry.eval_pipeline``) live in the host directory (``<build>/python``), which joins this
package when it is on ``sys.path`` (``__path__`` below); in a candidate's process it is not, so they cannot be
imported there.

- ``TestBase`` (kernelfoundry.test_base; ``kernelfoundry.custom_test.CustomTest`` is the same class): base class of
  a task's test class; its ``build`` / ``build_reference`` hooks are called by ``python -m
  kernelfoundry.build_target`` and return the list of artifact paths.
- ``kernelfoundry.conftest``: the pytest plugin (``from kernelfoundry.conftest import *``).
- ``kernelfoundry.testing``: correctness helpers; ``kernelfoundry.utils.performance`` (also
  ``kernelfoundry.eval_pipeline.utils.performance``): runtime measurement and profiler control;
  ``kernelfoundry.compiler``: compile_torch_extension, TorchCompiler, IcpxCompiler; ``kernelfoundry.utils.sysinfo``.

Importing this package must stay cheap (no torch import): it is loaded by every task run.
"""

from __future__ import annotations

from pathlib import Path
from pkgutil import extend_path

# The host side's portion of this package (a `kernelfoundry/` folder of another sys.path entry), when there is one.
__path__ = extend_path(__path__, __name__)

from .compiler import compile_torch_extension
from .test_base import TestBase

__all__ = ["TestBase", "CustomTest", "compile_torch_extension", "__version__", "PACKAGE_ROOT"]

__version__ = "0.1.0"

#: The directory of this package.
PACKAGE_ROOT = Path(__file__).resolve().parent

#: Legacy name of TestBase kept for old task packages (kernelfoundry.custom_test); never picked as the task's
#: own class.
CustomTest = TestBase
