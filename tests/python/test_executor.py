"""The function under test in a process of its own (kernelfoundry.executor, issue 9 item 4): the test process owns
the inputs, the clock and the comparison; the candidate's process cannot patch them. Unit cases for the executor,
then a task whose `kernel` fixture is an Executor, as the tests `kf import-kernelbench` writes: each cheat class is
caught or harmless, correctness checks cannot be patched away, and a crash keeps its verdict."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time

import pytest

from conftest import PYTHON_DIR, run_task_pytest, task_env, write_task

torch = pytest.importorskip("torch")
sys.path.insert(0, str(PYTHON_DIR))
from kernelfoundry.executor import Executor, ExecutorError  # noqa: E402

SIDES = textwrap.dedent('''
    import os, threading, time
    import torch

    CHEAT = os.environ.get("CHEAT", "none")

    def _reference(x, b, s):
        return torch.relu(x + b) * s

    def reference():
        return _reference

    def candidate():
        cache, calls = {}, [0]
        if CHEAT == "patch_checker":  # patches what a checker in this process would use, then returns zeros
            import kernelfoundry.testing as t, kernelfoundry.measure as m
            t.assert_allclose = lambda *a, **k: None
            m.measure_runtime = lambda *a, **k: [1e-6] * 10
            time.perf_counter = lambda: 0.0
            time.monotonic = lambda: 0.0
        def run(x, b, s):
            if CHEAT == "pointer_cache":
                key = (x.data_ptr(), b.data_ptr())
                if key not in cache:
                    cache[key] = _reference(x, b, s)
                return cache[key]
            if CHEAT == "every_nth":
                calls[0] += 1
                if calls[0] % 4 and "last" in cache:
                    return cache["last"]
                cache["last"] = _reference(x, b, s)
                return cache["last"]
            if CHEAT == "in_place":
                return x.add_(b).relu_().mul_(s)
            if CHEAT == "benchmark_shape" and x.size(0) >= 1024:
                return torch.empty_like(x)
            if CHEAT == "background":
                out = torch.empty_like(x)
                def work():  # 20 ms of this thread's CPU in torch calls, which let go of the GIL (a pure-Python
                    end = time.thread_time() + 0.02  # loop would hold it and delay the reply until the work is done);
                    m = torch.ones(96, 96)  # CPU time, not wall time: on a loaded machine a wall-clock deadline
                    while time.thread_time() < end:  # could pass while the thread waits for a CPU (CI saw 0.6 ms)
                        torch.mm(m, m)
                    torch.mul(torch.relu(x + b), s, out=out)
                threading.Thread(target=work).start()
                return out
            if CHEAT in ("zeros", "patch_checker"):
                return torch.zeros_like(x)
            if CHEAT == "crash":
                import ctypes
                ctypes.string_at(0)
            if CHEAT == "slow":  # three times the reference's work
                _reference(x, b, s)
                _reference(x, b, s)
            return _reference(x, b, s)
        return run
''')

TASK = textwrap.dedent('''
    from pathlib import Path
    import pytest, torch
    from kernelfoundry import TestBase
    from kernelfoundry.executor import Executor
    from kernelfoundry.testing import assert_allclose

    SCALE = 0.5

    def reference(x, b, s):
        return torch.relu(x + b) * s

    @pytest.fixture(scope="session")
    def kernel(use_reference):
        return Executor("sides:reference" if use_reference else "sides:candidate", cwd=str(Path(__file__).parent))

    class TestRemote(TestBase):
        def test_values(self, kernel):
            x, b = torch.randn(8, 16), torch.randn(16)
            x_copy = x.clone()
            assert_allclose(kernel(x, b, SCALE), reference(x_copy, b, SCALE))
            assert torch.equal(x, x_copy), "an input was modified"

        @pytest.mark.performance
        def test_bench(self, kernel, measure_runtime):
            g = torch.Generator().manual_seed(0)
            x = torch.randn(1024, 2048, generator=g)
            b = torch.randn(2048, generator=g)
            measure_runtime(kernel, lambda: None, args=(x, b, SCALE))
''')

FAST = json.dumps({"budget_s": 3.0, "min_rounds": 8, "target_rel_half_width": 0.05})
BENCH = "task.py::TestRemote::test_bench"


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return write_task(tmp_path_factory.mktemp("executor") / "task_remote", TASK, {"sides.py": SIDES})


def run_pytest(task, cheat: str, *args: str) -> tuple[dict, str, int]:
    """pytest on the task with kf's result pipe; returns (report, output, exit status)."""
    proc, report = run_task_pytest(task, *args, env=task_env(CHEAT=cheat, KF_THREADS="1"))
    return (report or {}), proc.stdout, proc.returncode


def paired(task, cheat="none", options=FAST):
    report, out, _ = run_pytest(task, cheat, "-m", "performance", "--kf-paired", f"--kf-paired-options={options}")
    assert report, out
    return report["paired"][BENCH], out


def paired_speedup(task, cheat, ok, options=FAST) -> tuple[dict, str]:
    """A short (3 s) paired run whose speedup must satisfy ok(record); one more run when the first did not (a
    loaded machine can disturb a 3 s measurement; two disturbed runs in a row fail the test)."""
    rec, out = paired(task, cheat, options)
    if not ok(rec):
        rec, out = paired(task, cheat, options)
    return rec, out


# ---- the executor itself ----

@pytest.fixture(scope="module")
def sides_dir(task):
    return str(task)


def test_a_call_runs_in_another_process_and_returns_the_output(sides_dir, monkeypatch):
    monkeypatch.setenv("CHEAT", "none")
    ex = Executor("sides:candidate", cwd=sides_dir)
    try:
        x, b = torch.randn(5, 7), torch.randn(7)
        out = ex(x, b, 0.5)
        assert torch.allclose(out, torch.relu(x + b) * 0.5)
        assert ex.proc.pid != os.getpid() and ex.proc.poll() is None
        bound = ex.bind((torch.zeros(5, 7), b, 2.0))
        bound.inputs[0].fill_(1.0)  # values written into the shared input are what the executor reads
        bound.call()
        assert torch.allclose(bound.output(), torch.relu(1.0 + b) * 2.0)
    finally:
        ex.close()
    assert ex.proc.poll() is not None


def test_an_input_the_callee_modifies_is_modified_for_the_caller(sides_dir, monkeypatch):
    monkeypatch.setenv("CHEAT", "in_place")
    ex = Executor("sides:candidate", cwd=sides_dir)
    try:
        x, b = torch.full((2, 3), -1.0), torch.full((3,), 3.0)
        ex(x, b, 1.0)
        assert torch.equal(x, torch.full((2, 3), 2.0))  # as a local in-place call would have left it
    finally:
        ex.close()


def test_an_exception_of_the_callee_is_raised_with_its_message(tmp_path):
    (tmp_path / "bad.py").write_text("def f():\n    def g(x):\n        raise ValueError('no such shape')\n"
                                     "    return g\n")
    ex = Executor("bad:f", cwd=str(tmp_path))
    try:
        with pytest.raises(ExecutorError, match="ValueError: no such shape"):
            ex(torch.zeros(2))
        with pytest.raises(ExecutorError, match="cannot pass an argument of type object"):
            ex(object())
    finally:
        ex.close()


def test_cpu_used_after_the_reply_is_measured(sides_dir, monkeypatch):
    monkeypatch.setenv("CHEAT", "background")
    ex = Executor("sides:candidate", cwd=sides_dir)
    try:
        bound = ex.bind((torch.randn(64), torch.randn(64), 1.0))
        seen = []
        # Most of the 20 ms busy thread runs after the reply. Up to three calls: settle ends after two quiet
        # 200 µs slices, so a thread kept off the CPUs that long (a loaded machine) is missed in that call, as it
        # would be in one round of a paired measurement (CI saw 0.0 once, 2026-12-01; not reproduced in 11 runs
        # quiet and under 4 hogs). Each attempt's CPU, the executor's clock before and after, are in the message.
        for _ in range(3):
            ex.settle()
            bound.call()
            before = ex.cpu_seconds()
            used = ex.settle(max_s=0.5)
            seen.append((used, before, ex.cpu_seconds(), ex.proc.poll()))
            if used > 0.005:
                break
        assert seen[-1][0] > 0.005, seen
    finally:
        ex.close()
    monkeypatch.setenv("CHEAT", "none")
    ex = Executor("sides:candidate", cwd=sides_dir)
    try:
        bound = ex.bind((torch.randn(64), torch.randn(64), 1.0))
        bound.call()
        ex.settle()
        bound.call()
        assert ex.settle(max_s=0.2) < 0.001
    finally:
        ex.close()


# ---- a task whose function under test runs in an executor ----

def test_identical_candidate_is_paired_across_two_executors_near_one(task):
    rec, out = paired_speedup(task, "none", lambda r: 0.8 < r["speedup"] < 1.25)
    assert rec["paired"] is True, out
    assert rec["status"] in ("correct", "noisy"), rec
    assert 0.8 < rec["speedup"] < 1.25, rec
    assert rec["rounds"] >= 8 and rec["checked_rounds"] >= 3 and rec["value_sets"] == 4
    assert rec["ci"][0] <= rec["speedup"] <= rec["ci"][1]


def test_slower_candidate_has_a_speedup_below_one(task):
    rec, out = paired_speedup(task, "slow", lambda r: r["speedup"] < 0.6 and r["ci"][1] < 1.0, FAST)
    # Three times the work: about 0.33; the interval must exclude 1. Regression: with twice the work and two
    # layouts, a loaded CI machine gave 0.66 [.., 1.22] twice in a row (2026-12-01).
    assert rec["speedup"] < 0.6 and rec["ci"][1] < 1.0, (rec, out[-2000:])


@pytest.mark.parametrize("cheat, status", [
    ("pointer_cache", "output_changed_under_timing"),
    ("every_nth", "output_changed_under_timing"),
    ("in_place", "input_mutated"),
    ("benchmark_shape", "output_changed_under_timing"),
    ("patch_checker", "output_changed_under_timing"),  # its patches stay in its own process
])
def test_cheats_are_caught(task, cheat, status):
    rec, out = paired(task, cheat)
    assert rec["status"] == status, (rec["status"], rec["detail"], out[-2000:])


def test_background_work_after_return_is_caught(task):
    rec, _ = paired(task, "background")
    assert rec["status"] in ("suspicious", "output_changed_under_timing"), (rec["status"], rec["detail"])
    if rec["status"] == "suspicious":
        assert "after the call returned" in rec["detail"]


def test_patching_the_checker_from_the_candidate_does_not_pass_the_correctness_test(task):
    report, out, code = run_pytest(task, "patch_checker", "-m", "not performance")
    tests = {t["name"]: t for t in report["tests"]}
    assert tests["TestRemote::test_values"]["status"] == "failed", out[-2000:]
    assert code == 1


def test_unpaired_timing_of_an_executor_times_round_trips_with_resident_inputs(task):
    report, out, code = run_pytest(task, "none", "-m", "performance")
    assert code == 0, out[-2000:]
    runtimes = report["runtimes"][BENCH]
    assert runtimes and all(0 < ms < 1000 for ms in runtimes)


def test_a_crash_of_the_candidate_ends_the_test_run_with_its_signal(task):
    started = time.monotonic()
    _, out, code = run_pytest(task, "crash", "-m", "not performance")
    assert code == -signal.SIGSEGV, out[-2000:]
    assert "died of signal 11 (SIGSEGV)" in out
    assert time.monotonic() - started < 120


# ---- the heap the plugin gives a test process started without kf ----

HEAP_SIDES = textwrap.dedent('''
    import resource
    import torch

    def faults_per_call():  # minor page faults per call of a 1024x2048 bias+relu (three 8 MB temporaries)
        x, b = torch.randn(1024, 2048), torch.randn(2048)
        def run(n):  # the fewest over three batches of n calls (the heap may still grow once: 2,048 faults)
            for _ in range(5):
                torch.relu(x + b) * 0.5
            batches = []
            for _ in range(3):
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                for _ in range(n):
                    torch.relu(x + b) * 0.5
                batches.append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / n)
            return torch.tensor([min(batches)])
        return run
''')

HEAP_TASK = textwrap.dedent('''
    import json, os
    import torch
    from pathlib import Path
    from kernelfoundry import TestBase
    from kernelfoundry.executor import Executor
    import heap_sides

    class TestHeap(TestBase):
        def test_faults(self):
            ex = Executor("heap_sides:faults_per_call", cwd=str(Path(__file__).parent), threads=1)
            try:
                remote = float(ex(10)[0])
            finally:
                ex.close()
            local = float(heap_sides.faults_per_call()(10)[0])
            Path("heap.json").write_text(json.dumps({"local": local, "executor": remote,
                                                     "env": os.environ.get("MALLOC_TRIM_THRESHOLD_")}))
''')


@pytest.mark.parametrize("given", [None, "1073741824"])
def test_a_test_process_started_without_kf_gets_a_steady_heap(tmp_path, given):
    """Regression (2026-12-01, CI and 4 of 20 local runs of the identical-candidate test above): pytest started
    directly, without kf's MALLOC_*_THRESHOLD_ environment, left glibc's dynamic thresholds on; a call with 8 MB
    temporaries then page-faulted on every call in some rounds and not in others (~6,000 faults, 2 vs 7 ms), and
    one executor pair of an identical candidate scored 2.25x. The plugin now fixes the thresholds in the test
    process and its executors, and leaves them alone when the environment sets them (kf does)."""
    task = write_task(tmp_path / "heap", HEAP_TASK, {"heap_sides.py": HEAP_SIDES})
    env = task_env(KF_THREADS="1")
    for key in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_CONF", "LD_PRELOAD"):
        env.pop(key, None)
    if given:
        env["MALLOC_TRIM_THRESHOLD_"] = env["MALLOC_MMAP_THRESHOLD_"] = given
    proc, report = run_task_pytest(task, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    seen = json.loads((task / "heap.json").read_text())
    assert seen["env"] == "1073741824"
    assert seen["local"] < 50 and seen["executor"] < 50, seen  # ~6,000 per call with the dynamic thresholds
