"""KernelFoundry's evaluation pipeline for Python programs — the documented API of the Python reference
(``kernelfoundry.eval_pipeline``), implemented by the C++ core through the extension ``_core``.

- :mod:`kernelfoundry.eval_pipeline.task`: ``Task``, ``ProcessResult``, ``BuildResult``, ``TestResult``
  (reference spec §3; the seed API document).
- :mod:`kernelfoundry.eval_pipeline.utils.memory_file_map`: ``MemoryFileMap`` (spec §2).
- :mod:`kernelfoundry.eval_pipeline.utils.custom_task_helper`: the reference's block / config / test-name
  helpers (``get_block``, ``update_block``, ``get_config``, ``get_test_names``, ``blocks_to_str``, …).
- :mod:`kernelfoundry.eval_pipeline.evaluation`: ``evaluate(task, candidate, db=None, parent_uuid=None, ...)
  -> Evaluation`` (what ``kf run`` does: build, test, time, score, and with ``db`` record).
- :mod:`kernelfoundry.eval_pipeline.store`: ``open_store(url)`` — access to stored results.
- :mod:`kernelfoundry.eval_pipeline.database` (needs SQLAlchemy; imported on use): the reference's database
  API (``init(cfg)``, ``add_job``, ``update_job_status``, ``add_job_log_batch``, models ``Kernel``, ``Task``,
  ``Job``, ``JobLog``, sessions) over our store.
- :mod:`kernelfoundry.eval_pipeline.errors`: one exception class per C++ error kind; each is also the
  builtin the reference raises (ValueError, FileNotFoundError, KeyError, AssertionError, ...).

- :mod:`kernelfoundry.eval_pipeline.utils.performance`: the task-side measurement helpers under the path the
  reference documents (the same module as ``kernelfoundry.utils.performance``; no compiled module needed).

The names above are loaded on first use (PEP 562), so importing this package (for example on the way to
``eval_pipeline.utils.performance`` in a task's test process) does not load the compiled core.

Split by trust: this ``__init__`` and ``utils.{performance,sysinfo,benchdnn_helper}`` are task side (a task's test
process imports them); everything else here — the compiled core and the modules over it — is the host side's
portion of this package (``<build>/python/kernelfoundry/eval_pipeline``), joined below when the host directory is
on ``sys.path`` and never importable in a candidate's process.

Setup: ``export PYTHONPATH=<build dir>/python`` (the build assembles the package there).
"""

from __future__ import annotations

import importlib
from pkgutil import extend_path
from typing import Any

# The host side's portion (the core and the API over it), when the host directory is on the path.
__path__ = extend_path(__path__, __name__)

#: Public name -> the submodule defining it (imported on first access).
_LAZY = {"Task": ".task", "ProcessResult": ".task", "BuildResult": ".task", "TestResult": ".task",
         "MemoryFileMap": ".utils.memory_file_map", "evaluate": ".evaluation", "Evaluation": ".evaluation",
         "open_store": ".store", "ResultStore": ".store", "Error": ".errors"}

__all__ = ["Task", "ProcessResult", "BuildResult", "TestResult", "MemoryFileMap", "evaluate", "Evaluation",
           "open_store", "ResultStore", "Error"]


def _load_core():
    """The compiled core, with a clear error when it is not built or not on the path."""
    try:
        return importlib.import_module("._core", __name__)
    except ImportError as e:  # pragma: no cover - depends on the build
        raise ImportError(
            "kernelfoundry.eval_pipeline._core is not built or not on the path (it is host side: a task's own "
            "processes never see it): build the project (`ninja -C build`) and `export PYTHONPATH=$PWD/build/python`"
            " — " + str(e)) from e


def __getattr__(name: str) -> Any:
    """Loads a public name (and the compiled core) on first access."""
    if name == "_core":
        return _load_core()
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _load_core()
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
