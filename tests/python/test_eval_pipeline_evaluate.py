"""evaluate() end to end on the native example examples/tasks/omp_reduction (C++/OpenMP, no torch build):
verdicts for a correct, a wrong and an unextractable candidate, progress callbacks from worker threads while
other Python threads keep running (GIL released), callback exceptions, Ctrl-C, and read access to stored
results."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import KF_BIN, PYTHON_DIR, REPO, task_env
from kernelfoundry.eval_pipeline import errors, evaluate, open_store
from kernelfoundry.eval_pipeline.task import Task

EXAMPLE = REPO / "examples" / "tasks" / "omp_reduction"
CANDIDATES = REPO / "examples" / "candidates" / "omp_reduction"
FAST_MEASURE = {"eval_config": {"warmup_min_time": 0.02, "perf_trials_min_time": 0.05}}
HANG = "double kf_sum_squares(const float* x, std::size_t n) {\n  volatile bool forever = true;\n" \
       "  while (forever) {}\n  return x[0] * n;\n}\n"


@pytest.fixture(scope="module")
def omp_task():
    task, metadata = Task.create(EXAMPLE)
    assert metadata == {}
    return task


def test_correct_candidate_with_progress_from_worker_threads(omp_task, tmp_path, tmp_path_factory, monkeypatch):
    # A build cache of its own: with a shared one, an earlier run of the same candidate is a cache hit and the
    # compiler's output lines this test expects never come.
    monkeypatch.setenv("KF_CACHE_DIR", str(tmp_path_factory.mktemp("kf_cache")))
    events = []
    lines = []
    ticks = []
    stop = threading.Event()

    def ticker():  # runs only if evaluate() releases the GIL while the children work
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        ev = evaluate(omp_task, (CANDIDATES / "fast.cpp").read_text(), overrides=FAST_MEASURE,
                      progress=lambda e: events.append((threading.get_ident(), e)),
                      on_output_line=lambda is_stderr, line: lines.append(line), work_root=tmp_path)
    finally:
        stop.set()
        t.join()
    assert ev.status in ("correct", "noisy") and ev.correct and ev.perf_score == 5, ev.eval_log
    assert ev.speedup > 0 and ev.runtime_ms > 0 and ev.combined_score > 5
    assert ev.archs == ["cpu"] and "#pragma omp parallel" in ev.output_code and "#pragma" not in ev.input_code
    assert ev.task.build_result.result.returncode == 0
    assert ev.task.test_result.correctness_result.returncode == 0
    assert ev.task.test_result_reference is not None
    assert ev.eval_result["perf_score"] == 5 and ev.result["status"] in ("correct", "noisy")
    assert [log["name"] for log in ev.logs][0] == "build custom"
    assert ev.timings["wall_s"] >= ev.timings["build_s"] > 0 and ev.work_dirs == []
    assert list(tmp_path.iterdir()) == []  # work dirs removed

    phases = [(e["phase"], e["variant"], e["finished"]) for _, e in events]
    assert ("build candidate", "custom", False) in phases and ("build candidate", "custom", True) in phases
    assert ("correctness", "custom", True) in phases and ("performance", "custom+reference", True) in phases
    assert all(e["ok"] for _, e in events if e["finished"]), events
    assert {tid for tid, _ in events} != {threading.get_ident()}  # callbacks came from pipeline threads
    assert any("g++" in line or "test_kernel" in line for line in lines)
    # The ticker kept running during the evaluation (with the GIL held throughout it would get ~0 ticks; the
    # bound leaves room for a loaded machine's late wake-ups).
    wall = ev.timings["wall_s"]
    assert len(ticks) > 0.1 * wall / 0.01, (len(ticks), wall)


def test_wrong_and_unextractable_candidates_are_verdicts(omp_task):
    wrong = evaluate(omp_task, (CANDIDATES / "wrong.cpp").read_text(), overrides=FAST_MEASURE)
    assert not wrong.correct and wrong.status in ("value_mismatch", "tests_failed") and wrong.perf_score in (3, 4)
    none = evaluate(omp_task, {"EVOLVE": None})
    assert none.status == "extraction_failed" and none.perf_score == 0
    assert none.task.extract_code_result.returncode == 1


def test_evaluate_from_thread_pool_workers(omp_task):
    """Optimisation loops call evaluate() from thread pools (the reference's controller uses 8 workers):
    no signal handling there, results per call."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: evaluate(omp_task, {"EVOLVE": None}), range(8)))
    assert [r.status for r in results] == ["extraction_failed"] * 8


def test_bad_input_raises(omp_task):
    with pytest.raises(KeyError):
        evaluate(omp_task, {"NOT_A_KEY": "x"})
    with pytest.raises(AssertionError):  # the task is validated first, like `kf run`
        evaluate(Task.decode({**omp_task.encode(), "config": {}}))
    with pytest.raises(FileNotFoundError):
        evaluate(REPO / "no_such_task")


def test_a_callback_exception_stops_and_is_reraised(omp_task):
    seen = []

    def progress(e):
        seen.append(e)
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        evaluate(omp_task, (CANDIDATES / "fast.cpp").read_text(), overrides=FAST_MEASURE, progress=progress)
    assert len(seen) == 1  # later events were not delivered


def interrupt_a_hanging_evaluation(tmp_path, overrides: dict) -> tuple[float, str]:
    """Runs evaluate() of a candidate that spins forever in a child Python, sends SIGINT once the correctness
    run has started, and returns (seconds from SIGINT to exit, stdout). Asserts that KeyboardInterrupt
    reached the caller and that no process of the evaluation and no work dir is left."""
    script = tmp_path / "run.py"
    work = tmp_path / "work"
    work.mkdir()
    script.write_text(textwrap.dedent(f"""
        import signal, sys, time
        # Ctrl-C as in an interactive terminal, also when the test suite runs as a background job (a shell
        # starts those with SIGINT ignored, and an ignored SIGINT stays ignored in every child: CI on 2026-12-04).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from kernelfoundry.eval_pipeline import evaluate
        def progress(e):
            if e["phase"] == "correctness" and not e["finished"]:
                print("CORRECTNESS_STARTED", flush=True)
        try:
            r = evaluate({str(EXAMPLE)!r}, {HANG!r}, overrides={overrides!r}, progress=progress,
                         work_root={str(work)!r})
            print("RETURNED", r.status, r.status_detail, flush=True)
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
            sys.exit(42)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=task_env(PYTHONPATH=str(PYTHON_DIR)))
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "CORRECTNESS_STARTED" in line:
            break
    else:  # evaluate() ended before its correctness run started (e.g. a build that failed): say how
        proc.wait(timeout=30)
        pytest.fail(f"the evaluation ended before its correctness run: {''.join(seen)[-2000:]}"
                    f"{proc.stderr.read()[-2000:]}")
    time.sleep(1.0)  # the test program is spinning now
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("evaluate() did not return after SIGINT")
    waited = time.monotonic() - sent
    assert proc.returncode == 42, (out[-3000:], err[-3000:])
    assert "INTERRUPTED" in out
    leftover = subprocess.run(["pgrep", "-f", str(work)], capture_output=True, text=True).stdout.split()
    assert leftover == [], "child processes survived the interrupt"
    assert list(work.iterdir()) == []  # work dirs removed
    return waited, out


def test_ctrl_c_raises_keyboard_interrupt_and_leaves_nothing_behind(tmp_path):
    interrupt_a_hanging_evaluation(tmp_path, {"test_timeout": 8, "test_output_inactivity_timeout": 8})


def test_ctrl_c_kills_the_running_child_at_once(tmp_path):
    """The KeyboardInterrupt requests EvaluateOptions::stop: the hanging test program is killed at once and
    evaluate() returns long before test_timeout."""
    waited, _ = interrupt_a_hanging_evaluation(tmp_path, {"test_timeout": 25, "test_output_inactivity_timeout": 25})
    assert waited < 10, f"the evaluation ran on for {waited:.1f} s after Ctrl-C (test_timeout is 25 s)"


def test_stored_results_are_readable(tmp_path):
    db = tmp_path / "kernels.sqlite3"
    with pytest.raises(FileNotFoundError):
        open_store(db)
    r = subprocess.run([str(KF_BIN), "run", str(EXAMPLE), "--candidate", str(CANDIDATES / "fast.cpp"),
                        "--no-verdict-cache", "--db", str(db)], capture_output=True, text=True, timeout=600,
                       env=task_env())
    assert r.returncode == 0, r.stdout + r.stderr
    for url in (str(db), db, f"sqlite:///{db}"):
        with open_store(url) as store:
            rows = store.kernels(task_name="omp_reduction")
            assert len(rows) == 1 and rows[0]["status"] in ("correct", "noisy") and rows[0]["job_status"] == "COMPLETE"
            assert rows[0]["improve_over_native"] > 0
            job = store.job(rows[0]["job_id"])
            assert job["status"] == "COMPLETE" and job["progress"] == 1.0
            task_row = store.task(rows[0]["task_id"])
            assert task_row["id"] == Task.create(EXAMPLE)[0].hash_id() and task_row["task_name"] == "omp_reduction"
            assert store.task("0" * 64) is None
            assert store.kernels(last=1, columns=["id", "score"])[0].keys() == {"id", "score", "job_status"}
            with pytest.raises(KeyError):
                store.job(12345)
            with pytest.raises(ValueError):
                store.kernels(columns=["no_such_column"])
    with pytest.raises(OSError):  # a PostgreSQL URL is understood; nothing listens on port 1
        open_store("postgresql://kf@127.0.0.1:1/kernels")
    with pytest.raises(ValueError):  # an unknown scheme is an error, not a file name
        open_store("mysql://localhost/kernels")
    os.chmod(db, 0o444)  # read-only access is enough
    assert len(open_store(db).kernels()) == 1
    sqlite3.connect(db).close()
    with pytest.raises(errors.Error):
        store.kernels()  # closed by the with block
