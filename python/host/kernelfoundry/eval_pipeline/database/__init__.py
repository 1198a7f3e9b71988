"""kernelfoundry.eval_pipeline.database — the reference's database API (reference spec §5.6) over OUR store:
``init(cfg)``, ``add_ignore_errors``, ``add_job``, ``update_job_status``, ``update_job_progress``,
``update_job_token_usage``, ``add_job_log``, ``add_job_log_batch``, the models ``Kernel``, ``Task``, ``Job``,
``JobLog``, ``Rag`` and the module attributes ``engine_readonly`` / ``engine_insert`` / ``SessionRO`` /
``SessionInsert``, so the reference's evaluator, MCP server and GUI code run unchanged against a database that
``kf`` writes (and ``kf results`` / ``kf serve`` / ``open_store`` read what they write).

Where it differs from the reference, on purpose:

- The schema is created, checked and migrated by our C++ store (``open_store(url, writable=True)``), never by
  SQLAlchemy's ``create_all``: a stale database is an InvalidArgumentError (a ValueError) naming the table and
  column, a database written before ``kernels.kf_status`` existed gets that column.
- The job lifecycle of ``update_job_status`` is the store's (one rule for kf and Python: a terminal status
  sets ``finished_at`` when empty, COMPLETE sets progress 1.0, progress clamped to [0, 1]); as in the
  reference, updating a CANCELED job exits the process.
- ``paths.kernels_db_path`` may also be a plain path or a ``postgresql://`` URL (the reference's SQLite branch
  passed SQLite-only connection arguments to every URL).

Sessions and models are SQLAlchemy's (1.4 on Debian 12, 2.x works too).
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote_plus

from sqlalchemy import create_engine as _create_engine
from sqlalchemy.orm import sessionmaker as _sessionmaker

from .. import _core
from .tables import Base, BaselineTime, Job, JobLog, Kernel, Rag, Task

#: Statuses meaning the job is over. Reaching one implies a ``finished_at``; see update_job_status.
TERMINAL_JOB_STATUSES = ("COMPLETE", "FAIL", "CANCELED", "VALIDATED")
#: Statuses meaning the job is running right now.
ACTIVE_JOB_STATUSES = ("INIT", "RUN", "VALIDATING")
JOB_STATUSES = ACTIVE_JOB_STATUSES + TERMINAL_JOB_STATUSES

#: The reference's default database (relative to the current directory).
DEFAULT_DB_URL = "sqlite:///runs/kernels.sqlite3"

__all__ = [
    "init",
    "add_ignore_errors",
    "add_job",
    "update_job_status",
    "update_job_progress",
    "update_job_token_usage",
    "add_job_log",
    "add_job_log_batch",
    "Kernel",
    "Task",
    "Rag",
    "Job",
    "JobLog",
    "engine_readonly",
    "engine_insert",
    "SessionRO",
    "SessionInsert",
]

engine_readonly = None
engine_insert = None
SessionRO = None
SessionInsert = None
#: Our store, open read-write on the database the sessions use (after init).
store = None


def _format_db_url(url: Optional[str]) -> Optional[str]:
    """``url`` with ``{NAME}`` replaced by environment variables (the reference's kernels_db_path format)."""
    if url is None:
        return None
    try:
        return url.format_map(os.environ)
    except KeyError as e:
        raise KeyError(f"database URL {url!r} names the environment variable {e} which is not set") from e


def _cfg_db_path(cfg: Any) -> Optional[str]:
    """cfg.paths.kernels_db_path (an OmegaConf config, a dict or an object with attributes), or None."""
    if cfg is None:
        return None
    paths = cfg.get("paths") if isinstance(cfg, dict) else getattr(cfg, "paths", None)
    if paths is None:
        return None
    value = paths.get("kernels_db_path", None) if hasattr(paths, "get") else getattr(paths, "kernels_db_path", None)
    return None if value is None else str(value)


def _sqlalchemy_url(url: str) -> str:
    """The SQLAlchemy form of a store URL: a plain path becomes sqlite:///path, postgres:// postgresql://."""
    if "://" not in url:
        path = Path(url)
        return "sqlite:///" + (path.as_posix() if not path.is_absolute() else "/" + path.as_posix().lstrip("/"))
    if url.startswith("postgres://"):
        return "postgresql://" + url[len("postgres://"):]
    return url


def _postgres_urls() -> tuple[str, str, dict]:
    """The reference's two roles when DB_IP is set: (read-only URL, insert URL, pool options)."""
    database_ip = os.environ["DB_IP"]
    if "dbaas" in database_ip:
        logging.getLogger("celery.backends.database").setLevel(logging.CRITICAL)
    readonly_password = os.environ.get("DB_READONLY_PASSWORD")
    if not readonly_password:
        raise ValueError("Missing required environment variable DB_READONLY_PASSWORD for kernel readonly "
                         "database connection.")
    insertonly_password = os.environ.get("DB_INSERTONLY_PASSWORD")
    if not insertonly_password:
        raise ValueError("Missing required environment variable DB_INSERTONLY_PASSWORD for kernel insert-only "
                         "database connection.")
    port = int(os.environ.get("DATABASE_PORT", "5432"))
    name = os.environ.get("KERNELS_DB_NAME") or os.environ.get("DATABASE_NAME", "kernels")
    pool = {"pool_pre_ping": True,
            "pool_recycle": int(os.environ.get("DB_POOL_RECYCLE_SECONDS", "300")),
            "pool_size": int(os.environ.get("DB_POOL_SIZE", "10")),
            "max_overflow": int(os.environ.get("DB_MAX_OVERFLOW", "20"))}
    ro = f"postgresql+psycopg2://codegen_readonly_user:{quote_plus(readonly_password)}@{database_ip}:{port}/{name}"
    ins = f"postgresql+psycopg2://codegen_insertonly_user:{quote_plus(insertonly_password)}@{database_ip}:{port}/{name}"
    return ro, ins, pool


def database_url(cfg: Any = None) -> str:
    """The database init(cfg) uses without DB_IP: cfg.paths.kernels_db_path ({ENV} names expanded), else
    sqlite:///runs/kernels.sqlite3."""
    return _format_db_url(_cfg_db_path(cfg)) or DEFAULT_DB_URL


def init(cfg: Any = None, *, url: Optional[str] = None) -> None:
    """Connects the sessions: PostgreSQL with the reference's two roles when $DB_IP is set, else the database
    of ``url`` or cfg.paths.kernels_db_path (default sqlite:///runs/kernels.sqlite3; a SQLite file's directory
    is created). The database is first opened read-write through our store, which creates the tables, checks
    them and migrates an older database. Raises InvalidArgumentError (a ValueError) for a stale schema,
    ValueError for a missing DB_* password or an in-memory SQLite URL, IoError when the server cannot be
    reached."""
    global engine_readonly, engine_insert, SessionRO, SessionInsert, store
    if os.environ.get("DB_IP") is not None and url is None:
        readonly_url, insert_url, options = _postgres_urls()
        readonly_options = insert_options = options
    else:
        insert_url = readonly_url = _sqlalchemy_url(url or database_url(cfg))
        if insert_url.startswith("sqlite:") and ":memory:" in insert_url:
            raise ValueError(f"{insert_url}: an in-memory SQLite database is not supported (use a file)")
        options = {"connect_args": {"check_same_thread": False}} if insert_url.startswith("sqlite:") else {}
        readonly_options = insert_options = options
    close()
    store = _core.open_store(insert_url, writable=True)  # creates, checks and migrates the schema
    engine_insert = _create_engine(insert_url, **insert_options)
    SessionInsert = _sessionmaker(engine_insert)
    engine_readonly = _create_engine(readonly_url, **readonly_options)
    SessionRO = _sessionmaker(engine_readonly)


def close() -> None:
    """Disposes the engines and closes our store (init() may be called again afterwards)."""
    global engine_readonly, engine_insert, SessionRO, SessionInsert, store
    for engine in (engine_insert, engine_readonly):
        if engine is not None:
            engine.dispose()
    if store is not None:
        store.close()
    engine_readonly = engine_insert = SessionRO = SessionInsert = store = None


def _require_init() -> None:
    if SessionInsert is None or store is None:
        raise RuntimeError("kernelfoundry.eval_pipeline.database.init(cfg) has not been called")


def add_ignore_errors(item) -> bool:
    """Adds a model instance (Kernel, Task, Job, …) and commits; False, with a log line instead of an error,
    when that fails (a task id stored already is logged as info)."""
    try:
        _require_init()
        with SessionInsert() as session:
            session.add(item)
            session.commit()
        return True
    except Exception as e:  # the reference never stops its loop for a database error
        text = str(e).lower()
        if "unique constraint" in text and "task" in text:
            logging.info("Info: Task already in database (not inserting it again due to unique ID constraint).")
        else:
            logging.warning(f"Could not add item to database. Error: {e}")
    return False


def add_job(task_origin: str, status: str = "INIT") -> Optional[int]:
    """Creates a job (progress 0, token counts 0, created_at now) and returns its id, or None on failure."""
    try:
        _require_init()
        with SessionInsert() as session:
            job = Job(task_origin=task_origin, status=status)
            session.add(job)
            session.commit()
            return job.id
    except Exception as e:
        print(f"Warning: Could not add job to database. Error: {e}")
    return None


def update_job_status(job_id: int, status: Optional[str] = None, started_at: Optional[datetime] = None,
                      finished_at: Optional[datetime] = None, task_id: Optional[str] = None,
                      config: Optional[dict] = None, progress: Optional[float] = None) -> bool:
    """Updates a job through our store's job lifecycle: status (one of JOB_STATUSES; a terminal one sets
    finished_at when it is empty, COMPLETE sets progress 1.0), started_at / finished_at (datetimes; naive =
    UTC), task_id, config, progress (clamped to [0, 1]). Returns True when written, False for an unknown job or
    a failure. A CANCELED job is never changed: the process exits with status 1, as in the reference."""
    assert status is None or status in JOB_STATUSES, f"Invalid status value {status}"
    try:
        _require_init()
        updated = store.update_job(job_id, status=status, progress=progress, task_id=task_id, config=config,
                                   started_at=started_at, finished_at=finished_at)
    except KeyError:  # NotFoundError: no such job
        return False
    except Exception as e:
        print(f"Warning: Could not update job status: {e}")
        return False
    if not updated:
        logging.error(f"Attempted to update job {job_id} which has been canceled. No updates will be applied.")
        sys.exit(1)
    return True


def update_job_progress(job_id: int, progress: float) -> bool:
    """update_job_status(job_id, progress=progress)."""
    return update_job_status(job_id, progress=progress)


def update_job_token_usage(job_id: int, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> bool:
    """Stores a job's aggregated token counts; False for an unknown job or a failure."""
    try:
        _require_init()
        with SessionInsert() as session:
            job = session.query(Job).filter_by(id=job_id).first()
            if job is None:
                return False
            job.input_tokens = input_tokens
            job.output_tokens = output_tokens
            job.cached_input_tokens = cached_input_tokens
            session.commit()
            return True
    except Exception as e:
        print(f"Warning: Could not update job token usage: {e}")
    return False


def _job_log(data: dict) -> JobLog:
    entry = JobLog(job_id=data["job_id"], hostname=data.get("hostname"), kernel_uuid=data.get("kernel_uuid"),
                   agent_session_id=data.get("agent_session_id"), level=data["level"], message=data["message"],
                   extra=data.get("extra") or None)
    if data.get("timestamp") is not None:
        entry.timestamp = data["timestamp"]
    return entry


def add_job_log(job_id: int, level: str, message: str, timestamp: Optional[datetime] = None,
                hostname: Optional[str] = None, kernel_uuid: Optional[str] = None,
                agent_session_id: Optional[str] = None) -> Optional[int]:
    """Adds one job_logs row (timestamp default: the server's now) and returns its id, or None on failure."""
    try:
        _require_init()
        with SessionInsert() as session:
            entry = _job_log({"job_id": job_id, "level": level, "message": message, "timestamp": timestamp,
                              "hostname": hostname, "kernel_uuid": kernel_uuid, "agent_session_id": agent_session_id})
            session.add(entry)
            session.commit()
            return entry.id
    except Exception as e:
        print(f"Warning: Could not add job log to database. Error: {e}")
    return None


def add_job_log_batch(logs: list[dict]) -> bool:
    """Adds job_logs rows in one transaction, each a dict with job_id, level, message and optionally
    hostname, kernel_uuid, agent_session_id, extra, timestamp. True when all were written."""
    try:
        _require_init()
        with SessionInsert() as session:
            for data in logs:
                session.add(_job_log(data))
            session.commit()
        return True
    except Exception as e:
        print(f"Warning: Could not add job logs batch to database. Error: {e}")
    return False
