"""kernelfoundry.eval_pipeline.database.tables — the reference's SQLAlchemy models (Kernel, Task, Job, JobLog,
Rag, BaselineTime; reference spec §5.6) over the tables of OUR store.

The columns are not written out here: they are built from the store's own description of its tables
(``_core.store_schema()``, src/store/schema.cc), so the models and ``kf`` can never disagree about a name, a
type, a length or a NOT NULL. They follow the reference's tables.py with two differences of the store (see
include/kernelfoundry/store.hpp): ``kernels.task_id`` may be NULL, and ``kernels`` has our column
``kf_status`` (our status name of the verdict; NULL for rows the reference's code writes).
Client-side defaults are the reference's: ``Kernel.db_user`` = the OS user, ``Job.progress`` = 0.0 and the
token counts 0. Tables are never created from these models: :func:`kernelfoundry.eval_pipeline.database.init`
opens the database through our store first, which creates, checks and migrates the schema.

Works with SQLAlchemy 1.4 (Debian 12's python3-sqlalchemy) and 2.x.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Column, DateTime, Float, Integer, String, Table, Text
from sqlalchemy.orm import declarative_base
from sqlalchemy.sql import func

from .. import _core

__all__ = ["Base", "Kernel", "BaselineTime", "Task", "Job", "JobLog", "Rag"]

Base = declarative_base()

#: The store's tables as data: {table name: {"name", "columns": [...]}} (kf::StoreSchema).
SCHEMA: dict[str, dict[str, Any]] = {t["name"]: t for t in _core.store_schema()}

#: Insert defaults of the reference's models (computed by SQLAlchemy when a value is not given).
_CLIENT_DEFAULTS: dict[tuple[str, str], Any] = {
    ("kernels", "db_user"): _core.default_db_user,
    ("jobs", "progress"): 0.0,
    ("jobs", "input_tokens"): 0,
    ("jobs", "output_tokens"): 0,
    ("jobs", "cached_input_tokens"): 0,
}


def _column_type(column: dict[str, Any]):
    kind = column["type"]
    if kind == "varchar":
        return String(column["length"]) if column["length"] else String()
    return {"integer": Integer, "float": Float, "text": Text, "boolean": Boolean,
            "datetime": lambda: DateTime(timezone=True), "json": JSON}[kind]()


def _table(name: str) -> Table:
    """The SQLAlchemy Table of store table `name`, column for column."""
    columns = []
    for c in SCHEMA[name]["columns"]:
        kwargs: dict[str, Any] = {"nullable": not c["not_null"] and not c["primary_key"]}
        if c["primary_key"]:
            kwargs["primary_key"] = True
            if c["autoincrement"]:
                kwargs["autoincrement"] = True
        if c["server_now"]:
            kwargs["server_default"] = func.now()
        if (name, c["name"]) in _CLIENT_DEFAULTS:
            kwargs["default"] = _CLIENT_DEFAULTS[(name, c["name"])]
        columns.append(Column(c["name"], _column_type(c), **kwargs))
    return Table(name, Base.metadata, *columns)


def _abbrev(value: Any, max_len: int = 60) -> str:
    if value is None:
        return "None"
    text = "\u21a9".join(str(value).splitlines())
    return text if len(text) <= max_len else f"{text[:max_len - 3]}..."


class _RowMixin:
    def to_dict(self) -> dict[str, Any]:
        """{column: value} of every column of this row."""
        return {c.key: getattr(self, c.key) for c in self.__table__.columns}


class Kernel(_RowMixin, Base):
    """A `kernels` row: one evaluated candidate (its verdict, timings, code, lineage)."""

    __tablename__ = "kernels"
    __table__ = _table("kernels")

    def __str__(self) -> str:
        lines = ["Kernel("]
        lines.extend(f"  {c.key}={_abbrev(getattr(self, c.key))}" for c in self.__table__.columns)
        lines.append(")")
        return "\n".join(lines)


class BaselineTime(_RowMixin, Base):
    """A `baseline_times` row: the runtime of a KernelBench operation on some hardware (ms)."""

    __tablename__ = "baseline_times"
    __table__ = _table("baseline_times")

    def __str__(self) -> str:
        return (f"BaselineTime(id={self.id}, level={self.level}, task_name={self.task_name}, mean={self.mean}, "
                f"std={self.std}, min={self.min}, max={self.max}, num_trials={self.num_trials}, "
                f"hardware={self.hardware}, device={self.device})")


class Task(_RowMixin, Base):
    """A `tasks` row: a task package (id = its hash id) with its tests, config and blocks."""

    __tablename__ = "tasks"
    __table__ = _table("tasks")

    def __str__(self) -> str:
        return (f"TaskData(id={self.id}, Op_ID={self.Op_ID}, task_name={self.task_name}, "
                f"has_build_step={self.has_build_step}, correctness_tests={self.correctness_tests}, "
                f"profile_tests={self.profile_tests}, config={self.config}, "
                f"hyperparameters_buildtime={self.hyperparameters_buildtime}, "
                f"hyperparameters_runtime={self.hyperparameters_runtime})")

    def generate_hash_id(self, data: str | dict) -> None:
        """Sets ``id`` to the reference's hash id of an encoded task_data dict (SHA-256 over the base64
        contents in sorted path order, config.yaml/.yml skipped; mode and mtime never count, so the legacy and
        the new encoding give the same id) or of a str. The same id as ``Task.hash_id()`` and ``kf hash``."""
        self.id = _core.generate_hash_id(data)


class Job(_RowMixin, Base):
    """A `jobs` row: one run of a controller or of kf (status, progress, times, token counts, config)."""

    __tablename__ = "jobs"
    __table__ = _table("jobs")

    def __str__(self) -> str:
        return (f"Job(id={self.id}, task_id={self.task_id}, status={self.status}, progress={self.progress}, "
                f"created_at={self.created_at}, started_at={self.started_at}, finished_at={self.finished_at}, "
                f"archived_at={self.archived_at}, input_tokens={self.input_tokens}, "
                f"output_tokens={self.output_tokens}, cached_input_tokens={self.cached_input_tokens}, "
                f"config={self.config})")


class JobLog(_RowMixin, Base):
    """A `job_logs` row. Raw process output rows have level 'RAW', the log's name as message ('build',
    'test_custom_correctness', …) and the text in extra['log']."""

    __tablename__ = "job_logs"
    __table__ = _table("job_logs")

    def __str__(self) -> str:
        return (f"JobLog(id={self.id}, job_id={self.job_id}, hostname={self.hostname}, "
                f"kernel_uuid={self.kernel_uuid}, level={self.level}, "
                f"timestamp={self.timestamp}, message={(self.message or '')[:60]}...)")


class Rag(_RowMixin, Base):
    """A `rag` row: an example kernel for retrieval."""

    __tablename__ = "rag"
    __table__ = _table("rag")

    def __str__(self) -> str:
        return (f"Rag(id={self.id}, descriptor={self.descriptor}, language={self.language}, "
                f"file_path={self.file_path}, category={self.category}, keywords={self.keywords}, "
                f"optimization_profile={self.optimization_profile}, origin={self.origin})")
