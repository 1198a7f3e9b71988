"""kernelfoundry.eval_pipeline.database against the reference: on SQLite and on a throwaway PostgreSQL 15,

- a database kf writes (``kf run --parent/--lineage``, ``evaluate(db=..., parent_uuid=...)``) is read column
  for column by the reference's own models (tests/store/reference_models.py: its tables as the reference's
  tables.py declares them, re-typed from the facts), and its job_logs rows are the reference's (the name in
  ``message``, the text in ``extra["log"]``, as its GUI groups them);
- a database the reference's models create and write (job, task, kernel with lineage, job logs as its log
  handler writes them) is read by ``kf results`` and ``open_store``, and then opened by our ``database.init``
  (migrated) and written on by reference-style code;
- the reference's evaluator / MCP-style calls (``init(cfg)``, ``task.to_database_task()``,
  ``add_ignore_errors``, ``add_job``, ``update_job_status``, ``session.add(Kernel(...))``, job logs) run
  unchanged against our API, with the facts of the reference's job lifecycle.
"""

from __future__ import annotations

import getpass
import importlib.util
import json
import subprocess
import types
from datetime import datetime, timezone
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect
from sqlalchemy.orm import sessionmaker

from conftest import KF_BIN, REPO, task_env
from kernelfoundry.eval_pipeline import database as db
from kernelfoundry.eval_pipeline import errors, evaluate, open_store
from kernelfoundry.eval_pipeline.database import tables
from kernelfoundry.eval_pipeline.task import Task
from pg_server import PgServer, PgUnavailable

EXAMPLE = REPO / "examples" / "tasks" / "omp_reduction"
CANDIDATE = REPO / "examples" / "candidates" / "omp_reduction" / "fast.cpp"
FAST_MEASURE = {"eval_config": {"warmup_min_time": 0.02, "perf_trials_min_time": 0.05}}
LINEAGE = {"parent_uuid": "11111111-2222-4333-8444-555555555555", "trial": 3, "version": 1,
           "prompt": "make the reduction faster", "answer": "```cpp\n// ...\n```", "language_model": "model-x",
           "agent_session_id": "session-42"}
#: The job-log name prefixes the reference's GUI (gui/job_logs.py) groups rows by.
GUI_PREFIXES = ("build_reference", "build", "test_reference_correctness", "test_custom_correctness",
                "test_reference_performance", "test_custom_performance", "test_reference_trace", "test_custom_trace")
RAW_EXTRA_KEYS = {"log", "output_data", "worker_info", "trial", "version", "iteration", "branch"}


def _load_reference_models():
    spec = importlib.util.spec_from_file_location("reference_models", REPO / "tests" / "store" / "reference_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REF = _load_reference_models()


@pytest.fixture(scope="module")
def pg():
    try:
        server = PgServer.start()
    except PgUnavailable as e:
        pytest.skip(f"kf-postgres-unavailable: {e}")
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    """A fresh, empty database of each backend (a SQLite file that does not exist yet, a new PG database)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs' / 'kernels.sqlite3'}"
    server = request.getfixturevalue("pg")
    return server.url(server.new_database())


@pytest.fixture(autouse=True)
def _close_database_module():
    yield
    db.close()


def ref_session(url):
    engine = create_engine(url)
    return engine, sessionmaker(engine)


def kf_results(url, *args):
    r = subprocess.run([str(KF_BIN), "results", "--db", url, *args], capture_output=True, text=True, timeout=60,
                       env=task_env())
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


# ------------------------------------------------------------------ kf writes, the reference reads
def test_kf_written_database_reads_in_the_reference_models(url, tmp_path):
    task, _ = Task.create(EXAMPLE)
    if url.startswith("sqlite"):  # kf run with the lineage flags
        r = subprocess.run([str(KF_BIN), "run", str(EXAMPLE), "--candidate", str(CANDIDATE), "--no-verdict-cache",
                            "--db", url, "--parent", LINEAGE["parent_uuid"],
                            "--lineage", json.dumps({k: v for k, v in LINEAGE.items() if k != "parent_uuid"})],
                           capture_output=True, text=True, timeout=900, env=task_env(KF_TIMING_BUDGET_S="2"))
        assert r.returncode == 0, r.stdout + r.stderr
    else:  # the Python API with the same lineage
        ev = evaluate(task, CANDIDATE.read_text(), overrides=FAST_MEASURE, db=url, work_root=tmp_path, **LINEAGE)
        assert ev.correct and ev.job_id == 1 and ev.kernel_id == 1 and len(ev.kernel_uuid) == 36, ev.eval_log

    engine, Session = ref_session(url)
    with Session() as s:
        kernels = s.query(REF.Kernel).all()
        assert len(kernels) == 1
        k = kernels[0]
        values = {c.key: getattr(k, c.key) for c in REF.Kernel.__table__.columns}  # every column reads
        assert set(values) == {c.name for c in REF.Kernel.__table__.columns}
        for key, value in LINEAGE.items():
            assert values[key] == value, key
        assert k.db_user == getpass.getuser()
        assert k.status == "correct" and k.score == 5 and k.runtime > 0 and k.improve_over_native > 0
        assert isinstance(k.timestamp, datetime) and isinstance(k.runtime_stats, dict) and k.runtime_stats
        assert k.task_id == task.hash_id() and k.task_name == "omp_reduction" and k.gpu_arch == "cpu"
        assert k.eval_log.startswith("kf status: ") and "#pragma omp" in k.output_code
        assert set(k.eval_worker_info) == {"cpu"} and isinstance(k.compile_worker_info, dict)
        assert isinstance(k.config, dict) and k.config["task_name"] == "omp_reduction"

        t = s.get(REF.Task, k.task_id)
        assert t.task_name == "omp_reduction" and t.task_origin == "custom" and t.has_build_step is True
        assert t.correctness_tests and t.profile_tests and isinstance(t.task_data, dict)
        assert set(t.task_data["reduce_kernel.cpp"]) >= {"content", "mode", "mtime"}
        assert t.evolve_block and t.Op_ID is None and t.Level_ID is None

        job = s.get(REF.Job, k.job_id)
        assert job.status == "COMPLETE" and job.progress == 1.0 and job.task_id == k.task_id
        assert job.created_at <= job.started_at <= job.finished_at
        assert (job.input_tokens, job.output_tokens, job.cached_input_tokens) == (0, 0, 0)

        logs = s.query(REF.JobLog).filter_by(job_id=job.id).order_by(REF.JobLog.id).all()
        assert logs and logs[0].message == "build"
        names = [log.message for log in logs]
        assert "test_custom_correctness" in names, names
        for log in logs:
            assert log.level == "RAW" and log.kernel_uuid == k.uuid and log.agent_session_id == "session-42"
            assert log.message.startswith(GUI_PREFIXES), log.message
            assert set(log.extra) == RAW_EXTRA_KEYS and log.extra["log"].startswith("Return code: ")
            assert log.extra["trial"] == log.extra["iteration"] == 3 and log.extra["version"] == 1
            assert log.hostname and isinstance(log.timestamp, datetime)
    engine.dispose()
    # Our readers agree, kf_status typed.
    with open_store(url) as store:
        row = store.kernels()[0]
        assert row["kf_status"] in ("correct", "noisy") and row["parent_uuid"] == LINEAGE["parent_uuid"]
        assert [log["message"] for log in store.job_logs(row["job_id"])] == names


# ------------------------------------------------------------------ the reference writes, kf reads
def write_like_the_reference(url):
    """What the reference's code writes with its own models on a database its create_all made."""
    if url.startswith("sqlite:///"):  # the reference's init creates the file's directory first
        Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    engine, Session = ref_session(url)
    REF.Base.metadata.create_all(engine)
    task, _ = Task.create(EXAMPLE)
    encoded = task.encode()["task_data"]
    with Session() as s:
        job = REF.Job(task_origin="custom", status="INIT")
        s.add(job)
        s.commit()
        hasher = tables.Task()
        hasher.generate_hash_id(encoded)
        s.add(REF.Task(id=hasher.id, task_name="omp_reduction", task_origin="custom", config=task.config,
                       task_data=encoded, has_build_step=True, correctness_tests=task.correctness_tests,
                       profile_tests=task.profile_tests, evolve_block="old code"))
        job.status, job.task_id = "RUN", hasher.id
        job.started_at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
        s.add(REF.Kernel(uuid="ref-kernel-1", task_name="omp_reduction", task_id=hasher.id, job_id=job.id,
                         status="correct", score=5, runtime=1.25, improve_over_native=2.0,
                         runtime_stats={"bench": {"mean": 1.25}}, eval_log="The kernel compiles and is correct",
                         gpu_arch="cpu", **LINEAGE))
        s.add_all([
            REF.JobLog(job_id=job.id, hostname="worker-1", kernel_uuid="ref-kernel-1", level="RAW", message="build",
                       extra={"log": "Return code: 0\n------ Standard Output ------\nok\n", "output_data": None,
                              "worker_info": {"hostname": "worker-1"}, "trial": 3, "version": 1},
                       timestamp=datetime(2026, 1, 2, 3, 4, 6, tzinfo=timezone.utc)),
            REF.JobLog(job_id=job.id, hostname="ctl", level="INFO", message="Evaluating trial 3"),
        ])
        job.status, job.progress = "COMPLETE", 1.0
        job.finished_at = datetime(2026, 1, 2, 3, 5, 0, tzinfo=timezone.utc)
        s.commit()
        ids = job.id, hasher.id
    engine.dispose()
    assert hasher.id == task.hash_id()
    return ids


def test_reference_written_database_reads_in_kf_and_takes_our_writes(url):
    job_id, task_id = write_like_the_reference(url)
    rows = json.loads(kf_results(url, "--json", "--all-columns"))
    assert len(rows) == 1
    r = rows[0]
    assert r["kf_status"] is None and r["status"] == "correct" and r["score"] == 5 and r["job_status"] == "COMPLETE"
    assert {k: r[k] for k in LINEAGE} == LINEAGE and r["db_user"] == getpass.getuser()
    assert r["runtime_stats"] == {"bench": {"mean": 1.25}} and r["task_id"] == task_id
    table = kf_results(url).splitlines()
    header = table[0].split()
    assert table[-1].split()[header.index("kf_status")] == "-"  # a row the reference wrote
    with open_store(url) as store:  # read-only: the reference's database is not changed
        assert store.kernels()[0]["kf_status"] is None
        job = store.job(job_id)
        assert job["status"] == "COMPLETE" and job["started_at"].startswith("2026-01-02 03:04:05")
        assert store.task(task_id)["evolve_block"] == "old code"
        logs = store.job_logs(job_id)
        assert [(log["level"], log["message"]) for log in logs] == [("RAW", "build"), ("INFO", "Evaluating trial 3")]
        assert logs[0]["extra"]["log"].startswith("Return code: 0") and logs[0]["timestamp"].startswith("2026-01-02 03:04:06")
    engine = create_engine(url)
    assert "kf_status" not in {c["name"] for c in inspect(engine).get_columns("kernels")}
    engine.dispose()

    # Our database API opens it (our store migrates it: kf_status added) and reference-style code writes on.
    db.init(url=url)
    assert db.add_ignore_errors(db.Kernel(uuid="kf-kernel-2", task_name="omp_reduction", task_id=task_id,
                                          job_id=job_id, status="compiled", score=4, kf_status="value_mismatch"))
    engine, Session = ref_session(url)
    with Session() as s:  # the reference's models still read everything (our column is ignored)
        assert [k.uuid for k in s.query(REF.Kernel).order_by(REF.Kernel.id)] == ["ref-kernel-1", "kf-kernel-2"]
    engine.dispose()
    rows = json.loads(kf_results(url, "--json"))
    assert [(row["id"], row["kf_status"]) for row in rows] == [(1, None), (2, "value_mismatch")]


# ------------------------------------------------------------------ reference-style code on our API
def test_reference_style_code_runs_against_our_database_api(url, monkeypatch):
    monkeypatch.setenv("KF_TEST_DB_URL", url)
    monkeypatch.delenv("DB_IP", raising=False)
    cfg = types.SimpleNamespace(paths={"kernels_db_path": "{KF_TEST_DB_URL}"})  # formatted with the environment
    db.init(cfg)
    assert db.SessionInsert is not None and db.engine_readonly is not None and db.store is not None

    task, _ = Task.create(EXAMPLE)
    row = task.to_database_task()
    assert isinstance(row, db.Task) and row.id == task.hash_id() and row.Op_ID is None
    task_id = row.id  # the session expires the instance on commit, as the reference's sessionmaker does
    assert db.add_ignore_errors(row) is True
    assert db.add_ignore_errors(task.to_database_task()) is False  # the id is stored already

    job_id = db.add_job(task_origin="custom")
    assert isinstance(job_id, int)
    started = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=timezone.utc)
    assert db.update_job_status(job_id, "RUN", started_at=started, task_id=task_id, config={"job_name": "j"})
    assert db.update_job_progress(job_id, 1.7) and open_store(url).job(job_id)["progress"] == 1.0  # clamped
    assert db.update_job_progress(job_id, -0.5) and open_store(url).job(job_id)["progress"] == 0.0
    assert db.update_job_token_usage(job_id, 100, 20, 7) is True
    assert db.update_job_token_usage(987654, 1, 1) is False

    with db.SessionInsert() as session:
        kernel = db.Kernel(uuid="k-1", task_name="omp_reduction", task_id=task_id, job_id=job_id, status="correct",
                           score=5, runtime=1.5, improve_over_native=3.0, runtime_stats={"b": {"mean": 1.5}},
                           **LINEAGE)
        session.add(kernel)
        session.commit()
        assert kernel.db_user == getpass.getuser() and kernel.kf_status is None and kernel.timestamp is not None
    log_id = db.add_job_log(job_id, "INFO", "starting", hostname="ctl", kernel_uuid="k-1")
    assert isinstance(log_id, int)
    assert db.add_job_log_batch([
        {"job_id": job_id, "hostname": "w", "kernel_uuid": "k-1", "agent_session_id": "session-42", "level": "RAW",
         "message": "test_custom_correctness",
         "extra": {"log": "Return code: 1\n", "output_data": None, "worker_info": {"hostname": "w"}, "trial": 3,
                   "version": 1},
         "timestamp": datetime(2026, 3, 4, 5, 6, 8, tzinfo=timezone.utc)},
        {"job_id": job_id, "level": "DEBUG", "message": "step"},
    ]) is True
    assert db.update_job_status(job_id, "COMPLETE") is True

    with open_store(url) as store:
        job = store.job(job_id)
        assert job["status"] == "COMPLETE" and job["progress"] == 1.0 and job["finished_at"] is not None
        assert job["started_at"] == "2026-03-04 05:06:07.123456" and job["task_id"] == task_id
        assert job["config"] == {"job_name": "j"} and (job["input_tokens"], job["cached_input_tokens"]) == (100, 7)
        k = store.kernels()[0]
        assert {key: k[key] for key in LINEAGE} == LINEAGE and k["job_status"] == "COMPLETE"
        assert [log["message"] for log in store.job_logs(job_id)] == ["starting", "test_custom_correctness", "step"]
        assert store.task(task_id)["task_name"] == "omp_reduction"
    with db.SessionRO() as session:
        assert session.query(db.Job).count() == 1 and session.get(db.Job, job_id).status == "COMPLETE"
        assert session.query(db.JobLog).filter_by(level="RAW").one().extra["trial"] == 3

    # The lifecycle's edges, as the reference's update_job_status.
    other = db.add_job("custom", status="INIT")
    assert db.update_job_status(other, "FAIL") and open_store(url).job(other)["finished_at"] is not None
    assert db.update_job_status(987654, "RUN") is False
    with pytest.raises(AssertionError):
        db.update_job_status(other, "DONE")
    canceled = db.add_job("custom")
    assert db.update_job_status(canceled, "CANCELED")
    with pytest.raises(SystemExit) as e:
        db.update_job_status(canceled, "RUN")
    assert e.value.code == 1 and open_store(url).job(canceled)["status"] == "CANCELED"


def test_init_refuses_a_stale_database_and_bad_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("DB_IP", raising=False)
    path = tmp_path / "stale.sqlite3"
    db.init(url=str(path))  # a plain path works too
    db.close()
    import sqlite3
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE jobs DROP COLUMN progress")
    with pytest.raises(ValueError) as e:
        db.init(url=f"sqlite:///{path}")
    assert "jobs.progress" in str(e.value) and "stale" in str(e.value)
    assert db.SessionInsert is None
    with pytest.raises(ValueError):
        db.init(url="sqlite:///:memory:")
    with pytest.raises(KeyError):  # an unset environment variable in kernels_db_path
        db.init(types.SimpleNamespace(paths={"kernels_db_path": "sqlite:///{KF_NO_SUCH_VARIABLE}/k.sqlite3"}))
    monkeypatch.setenv("DB_IP", "127.0.0.1")
    monkeypatch.delenv("DB_READONLY_PASSWORD", raising=False)
    with pytest.raises(ValueError) as e:
        db.init(None)
    assert "DB_READONLY_PASSWORD" in str(e.value)
    monkeypatch.delenv("DB_IP")
    assert db.add_job("custom") is None  # not initialised: a warning, no exception (the reference's behaviour)
    monkeypatch.chdir(tmp_path)
    db.init(types.SimpleNamespace(paths={}))  # the reference's default, relative to the current directory
    assert (tmp_path / "runs" / "kernels.sqlite3").exists() and db.add_job("custom") == 1


def test_models_follow_our_store_schema():
    for table in tables.Base.metadata.sorted_tables:
        ours = {c["name"]: c for c in tables.SCHEMA[table.name]["columns"]}
        assert [c.name for c in table.columns] == list(ours)
        for c in table.columns:
            assert c.nullable == (not ours[c.name]["not_null"] and not ours[c.name]["primary_key"]), (table, c)
            if ours[c.name]["type"] == "varchar":
                assert c.type.length == (ours[c.name]["length"] or None), (table, c)
    # The reference's columns, each with its type and length, are in our models (ours add kernels.kf_status).
    for ref_table in REF.Base.metadata.sorted_tables:
        mine = tables.Base.metadata.tables[ref_table.name]
        extra = [c.name for c in mine.columns if c.name not in ref_table.columns]
        assert extra == (["kf_status"] if ref_table.name == "kernels" else []), ref_table.name
        for c in ref_table.columns:
            assert type(mine.columns[c.name].type).__name__ == type(c.type).__name__, (ref_table.name, c.name)
            assert getattr(mine.columns[c.name].type, "length", None) == getattr(c.type, "length", None)


def test_evaluate_lineage_needs_a_database():
    with pytest.raises(errors.InvalidArgumentError):
        evaluate(EXAMPLE, CANDIDATE.read_text(), parent_uuid="p")
    with pytest.raises(ValueError):
        evaluate(EXAMPLE, CANDIDATE.read_text(), db="unused.sqlite3", trial="three")


def test_kf_run_lineage_flags_are_checked_before_anything_runs(tmp_path):
    def kf_run(*args):
        return subprocess.run([str(KF_BIN), "run", str(EXAMPLE), *args], capture_output=True, text=True, timeout=120,
                              env=task_env(), cwd=tmp_path)
    r = kf_run("--parent", "p", "--no-store")
    assert r.returncode == 2 and "--no-store" in r.stderr, r.stderr
    r = kf_run("--lineage", '{"parent": "x"}', "--db", str(tmp_path / "k.sqlite3"))
    assert r.returncode == 3 and r.stderr.startswith("kf: error: --lineage: parent: unknown lineage key"), r.stderr
    (tmp_path / "l.json").write_text('{"trial": "3"}')
    r = kf_run("--lineage", str(tmp_path / "l.json"), "--db", str(tmp_path / "k.sqlite3"))
    assert r.returncode == 3 and "l.json: trial: expected an integer" in r.stderr, r.stderr
    assert not (tmp_path / "k.sqlite3").exists() or open_store(tmp_path / "k.sqlite3").kernels() == []
