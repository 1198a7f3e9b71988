"""kernelfoundry.eval_pipeline.store — read access to stored results (the reference's kernels / jobs / tasks
tables, spec §5.6), e.g. those ``kf run`` writes to runs/kernels.sqlite3.

    store = open_store("sqlite:///runs/kernels.sqlite3")
    for row in store.kernels(task_name="relu_cpu", last=5):
        print(row["status"], row["score"], row["improve_over_native"], row["job_status"])
"""

from __future__ import annotations

from ._core import ResultStore, open_store

__all__ = ["open_store", "ResultStore"]
