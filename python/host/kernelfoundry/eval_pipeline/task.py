"""kernelfoundry.eval_pipeline.task — Task, ProcessResult, BuildResult and TestResult (reference spec §3, the
seed API document), implemented by the C++ core (include/kernelfoundry/task.hpp, results.hpp).

Semantics are the C++ core's: the reference's, with its bugs fixed (spec §6; B9 merge return codes, B10
results_per_gpu kept by decode, B11 ``{path: [None]}`` in with_blocks, B12 no shared file streams). Field
access follows the reference's dataclasses: dict and list fields return copies (assign the attribute to
change them); result fields (``task.build_result``, ``build_result.result``, ...) and ``task.task_data`` are
live views of the parent. Errors are the classes of :mod:`kernelfoundry.eval_pipeline.errors`, which are also
the builtins the reference raises. See task.pyi for signatures, shapes and units.

``Task.to_database_task()`` returns the reference's SQLAlchemy model
(:class:`kernelfoundry.eval_pipeline.database.tables.Task`, ready for ``database.add_ignore_errors``) when
SQLAlchemy can be imported, else a :class:`DatabaseTask` with the same attributes.
"""

from __future__ import annotations

from ._core import BuildResult, DatabaseTask, ProcessResult, Task, TestResult

__all__ = ["Task", "ProcessResult", "BuildResult", "TestResult", "DatabaseTask"]
