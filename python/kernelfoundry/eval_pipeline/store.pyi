"""Type stubs of kernelfoundry.eval_pipeline.store (include/kernelfoundry/store.hpp, reference spec §5.6)."""

from os import PathLike
from typing import Any, Optional, Sequence, Union

class ResultStore:
    """A results database opened read-only. Rows are dicts keyed by column; JSON columns parsed; timestamps
    UTC text 'YYYY-MM-DD HH:MM:SS.ffffff'; runtime columns in ms."""

    @property
    def url(self) -> str: ...
    def kernels(self, *, task_name: Optional[str] = None, job_id: Optional[int] = None, last: int = 0,
                columns: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
        """`kernels` rows (oldest first) + 'job_status'; last = only the newest N (0 = all); columns = which
        columns (default all). InvalidArgumentError for an unknown column."""
    def job(self, job_id: int) -> dict[str, Any]:
        """The `jobs` row. NotFoundError (KeyError) for an unknown id."""
    def task(self, task_id: str) -> Optional[dict[str, Any]]:
        """The `tasks` row with this hash id, or None."""
    def close(self) -> None: ...
    def __enter__(self) -> ResultStore: ...
    def __exit__(self, *exc: object) -> None: ...

def open_store(url: Union[None, str, PathLike] = None) -> ResultStore:
    """Opens a results database read-only: a path, 'sqlite:///relative/path' or 'sqlite:////absolute/path';
    None = $KF_DB, else runs/kernels.sqlite3. NotFoundError (FileNotFoundError) when the file is missing,
    InvalidArgumentError for a stale schema, UnsupportedError for other schemes (postgresql://)."""
