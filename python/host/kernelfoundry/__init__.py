"""The host side of KernelFoundry's Python package — the directory host programs put on PYTHONPATH
(``export PYTHONPATH=<build>/python``, installed: ``<prefix>/share/kernelfoundry/python``; README "Python API").

``kernelfoundry`` is ONE package split by trust across two directories (python/README.md lists every module and
where it runs):

* the task side, ``<build>/python-task`` (sibling of this directory): what runs inside a contained task run; the
  only directory on a candidate's PYTHONPATH. It owns the package's ``__init__`` (TestBase, ...).
* the host side, this directory: the warm-start zygote (``kernelfoundry.zygote``) and the containment binding it
  uses (``kernelfoundry._contain``), the precompiled-header builder (``kernelfoundry.pch_build``), the compiled core
  and the reference's Python API (``kernelfoundry.eval_pipeline.{task,evaluation,store,errors,database}``,
  ``eval_pipeline.utils.{memory_file_map,custom_task_helper}``, ``eval_pipeline._core``). Never on a candidate's
  path, so none of it can be imported in a candidate's process.

This file only runs when this directory comes before the task side on ``sys.path`` (or is the only one there):
it loads the task side's package from the sibling directory in place of itself. The task side's ``__init__``
then joins this directory's modules to the package (``pkgutil.extend_path``), as it does whenever both
directories are on ``sys.path`` in any order.
"""

import importlib.machinery as _machinery
import importlib.util as _util
import os as _os
import sys as _sys

_HOST_DIR = _os.path.dirname(_os.path.abspath(__file__))
#: The task side's directory: the sibling ``python-task`` of this directory's parent (build tree and install alike).
TASK_ROOT = _os.path.join(_os.path.dirname(_os.path.dirname(_HOST_DIR)), "python-task")

_spec = _machinery.PathFinder.find_spec(__name__, [TASK_ROOT])
if _spec is None or _spec.loader is None or not _spec.submodule_search_locations:
    raise ImportError(f"kernelfoundry: the task side of the package is missing: no {TASK_ROOT}/kernelfoundry/__init__.py "
                      f"beside the host side {_HOST_DIR} (build the project, or install it with `cmake --install`)")
_package = _util.module_from_spec(_spec)
_package.__path__.append(_HOST_DIR)
_sys.modules[__name__] = _package  # what `import kernelfoundry` returns: the task side's package, with this portion
_spec.loader.exec_module(_package)
