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

Setup: ``export PYTHONPATH=<build dir>/python`` (the build assembles the package there).
"""

from __future__ import annotations

try:
    from . import _core  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "kernelfoundry.eval_pipeline._core is not built or not on the path: build the project "
        "(`ninja -C build`) and `export PYTHONPATH=$PWD/build/python` — " + str(e)) from e

from .errors import Error  # noqa: E402
from .evaluation import Evaluation, evaluate  # noqa: E402
from .store import ResultStore, open_store  # noqa: E402
from .task import BuildResult, ProcessResult, Task, TestResult  # noqa: E402
from .utils.memory_file_map import MemoryFileMap  # noqa: E402

__all__ = ["Task", "ProcessResult", "BuildResult", "TestResult", "MemoryFileMap", "evaluate", "Evaluation",
           "open_store", "ResultStore", "Error"]
