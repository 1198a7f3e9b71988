"""The reference's tables as SQLAlchemy models, re-typed from the facts of its tables.py (column names and
order, types, VARCHAR lengths, NOT NULL, server and client defaults; reference-spec.md section 5.6), not from
its code. Used by tests/store/schema_test.cc (`python3 reference_models.py URL` creates them with
metadata.create_all, as the reference does, so the test can compare our schema with SQLAlchemy's on SQLite and
PostgreSQL) and by tests/python/test_ref_api_database.py (the reference's models reading what kf writes and
writing what kf reads)."""
import getpass
import sys

from sqlalchemy import JSON, Boolean, Column, DateTime, Float, Integer, String, Text, create_engine, func
from sqlalchemy.orm import declarative_base

Base = declarative_base()


def ts(**kw):
    return Column(DateTime(timezone=True), **kw)


class Kernel(Base):
    __tablename__ = "kernels"
    id = Column(Integer, primary_key=True, autoincrement=True)
    timestamp = ts(server_default=func.now(), nullable=False)
    uuid = Column(String)
    parent_uuid = Column(String)
    task_name = Column(String)
    Level_ID = Column(Integer)
    input_code = Column(Text)
    input_language = Column(String)
    output_code = Column(Text)
    output_language = Column(String)
    Op_ID = Column(String)
    job_name = Column(String)
    prompt = Column(Text)
    answer = Column(Text)
    status = Column(String)
    trial = Column(Integer)
    runtime = Column(Float)
    runtime_stats = Column(JSON)
    improve_over_native = Column(Float)
    improve_over_compile = Column(Float)
    score = Column(Integer)
    eval_log = Column(Text)
    version = Column(Integer)
    index_level_0 = Column(Integer)
    language_model = Column(String)
    profiler_data = Column(JSON)
    profiler_data_reference = Column(JSON)
    profiler_data_detail = Column(JSON)
    profiler_data_detail_reference = Column(JSON)
    template_results = Column(JSON)
    optimization_profile = Column(JSON)
    gpu_arch = Column(String)
    eval_worker_info = Column(JSON)
    compile_worker_info = Column(JSON)
    config = Column(JSON)
    task_id = Column(String(64), nullable=False)
    job_id = Column(Integer)
    agent_session_id = Column(String(64))
    db_user = Column(String(128), nullable=False, default=getpass.getuser)


class Task(Base):
    __tablename__ = "tasks"
    id = Column(String(64), primary_key=True)
    task_name = Column(String, nullable=False)
    Op_ID = Column(String)
    task_origin = Column(String, nullable=False)
    config = Column(JSON)
    Level_ID = Column(Integer)
    task_data = Column(JSON)
    has_build_step = Column(Boolean, nullable=False)
    correctness_tests = Column(JSON)
    profile_tests = Column(JSON)
    evolve_block = Column(String)
    reference_block = Column(String)
    user_instructions_block = Column(String)
    hyperparameters_buildtime = Column(JSON)
    hyperparameters_runtime = Column(JSON)


class Job(Base):
    __tablename__ = "jobs"
    id = Column(Integer, primary_key=True)
    task_id = Column(String(64))
    task_origin = Column(String, nullable=False)
    status = Column(String(16), nullable=False)
    progress = Column(Float, nullable=False, default=0.0)
    created_at = ts(server_default=func.now(), nullable=False)
    started_at = ts()
    finished_at = ts()
    archived_at = ts()
    input_tokens = Column(Integer, default=0)
    output_tokens = Column(Integer, default=0)
    cached_input_tokens = Column(Integer, default=0)
    config = Column(JSON)


class JobLog(Base):
    __tablename__ = "job_logs"
    id = Column(Integer, primary_key=True)
    job_id = Column(Integer, nullable=False)
    hostname = Column(String)
    kernel_uuid = Column(String)
    agent_session_id = Column(String(64))
    level = Column(String(16), nullable=False)
    timestamp = ts(server_default=func.now(), nullable=False)
    message = Column(Text, nullable=False)
    extra = Column(JSON)


class BaselineTime(Base):
    __tablename__ = "baseline_times"
    id = Column(Integer, primary_key=True)
    level = Column(String, nullable=False)
    task_name = Column(String, nullable=False)
    mean = Column(Float)
    std = Column(Float)
    min = Column(Float)
    max = Column(Float)
    num_trials = Column(Integer)
    hardware = Column(String)
    device = Column(String)
    platform = Column(String)
    backend = Column(String)


class Rag(Base):
    __tablename__ = "rag"
    id = Column(Integer, primary_key=True)
    task_name = Column(String)
    language = Column(String, nullable=False)
    descriptor = Column(String)
    kernel_code = Column(String)
    file_path = Column(String, nullable=False)
    category = Column(String, nullable=False)
    keywords = Column(String)
    optimization_profile = Column(JSON)
    embedded_text = Column(String, nullable=False)
    embedding = Column(JSON)
    origin = Column(String)


if __name__ == "__main__":
    Base.metadata.create_all(create_engine(sys.argv[1]))
