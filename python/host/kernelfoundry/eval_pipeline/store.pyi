"""Type stubs of kernelfoundry.eval_pipeline.store (include/kernelfoundry/store.hpp, reference spec §5.6)."""

from datetime import datetime
from os import PathLike
from typing import Any, Optional, Sequence, Union

class ResultStore:
    """A results database, read-only unless opened with writable=True. Rows are dicts keyed by column; JSON
    columns parsed; timestamps UTC text 'YYYY-MM-DD HH:MM:SS.ffffff'; runtime columns in ms."""

    @property
    def url(self) -> str: ...
    def kernels(self, *, task_name: Optional[str] = None, job_id: Optional[int] = None, last: int = 0,
                columns: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
        """`kernels` rows (oldest first) + 'job_status'; last = only the newest N (0 = all); columns = which
        columns (default all, kf_status included: our status name, None for rows the reference wrote).
        InvalidArgumentError for an unknown column."""
    def job(self, job_id: int) -> dict[str, Any]:
        """The `jobs` row. NotFoundError (KeyError) for an unknown id."""
    def job_logs(self, job_id: int) -> list[dict[str, Any]]:
        """The `job_logs` rows of a job, oldest first (extra parsed)."""
    def update_job(self, job_id: int, *, status: Optional[str] = None, progress: Optional[float] = None,
                   task_id: Optional[str] = None, config: Optional[dict] = None,
                   started_at: Union[None, str, datetime] = None, finished_at: Union[None, str, datetime] = None,
                   started: bool = False) -> bool:
        """The store's job lifecycle (a terminal status sets finished_at when empty, COMPLETE sets progress
        1.0, progress clamped to [0, 1]); explicit times are written as given (naive datetime = UTC). False,
        writing nothing, for a CANCELED job. NotFoundError (KeyError) for an unknown job; IoError when
        read-only."""
    def task(self, task_id: str) -> Optional[dict[str, Any]]:
        """The `tasks` row with this hash id, or None."""
    def close(self) -> None: ...
    def __enter__(self) -> ResultStore: ...
    def __exit__(self, *exc: object) -> None: ...

def open_store(url: Union[None, str, PathLike] = None, *, writable: bool = False) -> ResultStore:
    """Opens a results database, read-only unless writable: a path, 'sqlite:///relative/path',
    'sqlite:////absolute/path' or 'postgresql://user[:password]@host[:port]/db'; None = $KF_DB, else
    runs/kernels.sqlite3. Writable: the file, database and missing tables are created and an older database is
    migrated (kernels.kf_status added). NotFoundError (FileNotFoundError) when the file is missing (read-only),
    InvalidArgumentError for a stale schema or an unknown scheme, IoError when the server cannot be reached."""
