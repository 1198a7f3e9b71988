"""Regression (issue 23): a benchmark that passes measure_runtime a LIST of input sets — the reference's documented
form ``measure_runtime(kernel, sync, args=[(x0,), (x1,), ...], kwargs=[{}] * n)`` — got `no_measurement` under
`kf run`: in paired mode the capture did ``dict(kwargs or {})`` on the list and every benchmark failed with
"ValueError: dictionary update sequence element #0 has length 0; 2 is required". Now each side's sets rotate in
paired and plain timing, in the test process and in executors. Three synthetic tasks at the pytest level (torch
in-process, numpy with keyword lists, an executor), and `kf run` on two tasks (a Python candidate without a build
and the compiled example examples/tasks/axpby_list_inputs) giving a speedup with an interval."""

from __future__ import annotations

import json
import textwrap

import pytest

from compat_util import benchmark_rows, kf_run
from conftest import FAST_MEASURE, REPO, run_task_pytest, task_env, write_task

PAIRED_FAST = json.dumps({"budget_s": 3.0, "min_rounds": 8, "target_rel_half_width": 0.05})

TORCH_TASK = textwrap.dedent('''
    import os
    import pytest, torch
    from kernelfoundry import TestBase

    CHEAT = os.environ.get("CHEAT", "none")
    SEEN = set()
    _cache = {}

    def reference(x, b):
        return torch.relu(x + b)

    def candidate(x, b):
        SEEN.add(x.data_ptr())
        if CHEAT == "pointer_cache":
            key = (x.data_ptr(), b.data_ptr())
            if key not in _cache:
                _cache[key] = torch.relu(x + b)
            return _cache[key]
        if CHEAT == "in_place":
            return x.add_(b).relu_()
        return torch.clamp_min(x + b, 0.0)

    @pytest.fixture(scope="session")
    def kernel(use_reference):
        return reference if use_reference else candidate

    class TestTorchList(TestBase):
        def test_values(self, kernel):
            x, b = torch.randn(8, 16), torch.randn(16)
            assert torch.allclose(kernel(x.clone(), b), reference(x, b))

        @pytest.mark.performance
        def test_bench(self, kernel, measure_runtime, use_reference, pytestconfig):
            g = torch.Generator().manual_seed(0)
            sets = [(torch.randn(256, 512, generator=g), torch.randn(512, generator=g)) for _ in range(4)]
            measure_runtime(kernel, lambda: None, args=sets, kwargs=[{}] * len(sets))
            if not pytestconfig.getoption("kf_paired") and not use_reference:
                assert SEEN == {x.data_ptr() for x, _ in sets}, "every input set was used"
''')

NUMPY_TASK = textwrap.dedent('''
    import numpy as np
    import pytest
    from kernelfoundry import TestBase

    def reference(x, scale=1.0, shift=0.0):
        return np.tanh(x) * scale + shift

    def candidate(x, scale=1.0, shift=0.0):
        out = np.tanh(x)
        out *= scale
        out += shift
        return out

    @pytest.fixture(scope="session")
    def kernel(use_reference):
        return reference if use_reference else candidate

    class TestNumpyList(TestBase):
        def test_values(self, kernel):
            x = np.linspace(-3, 3, 101)
            np.testing.assert_allclose(kernel(x, scale=2.0, shift=1.0), reference(x, scale=2.0, shift=1.0))

        @pytest.mark.performance
        def test_bench(self, kernel, measure_runtime_torch):
            rng = np.random.default_rng(0)
            args = [(rng.standard_normal(20000),) for _ in range(3)]
            kwargs = [{"scale": 2.0, "shift": float(i)} for i in range(3)]
            measure_runtime_torch(kernel, "cpu", args=args, kwargs=kwargs)
''')

SIDES = textwrap.dedent('''
    import torch

    def _reference(x, b):
        return torch.relu(x + b)

    def reference():
        return _reference

    def candidate():
        return lambda x, b: torch.clamp_min(x + b, 0.0)
''')

EXECUTOR_TASK = textwrap.dedent('''
    from pathlib import Path
    import pytest, torch
    from kernelfoundry import TestBase
    from kernelfoundry.executor import Executor

    @pytest.fixture(scope="session")
    def kernel(use_reference):
        return Executor("sides:reference" if use_reference else "sides:candidate", cwd=str(Path(__file__).parent))

    class TestExecutorList(TestBase):
        def test_values(self, kernel):
            x, b = torch.randn(8, 16), torch.randn(16)
            assert torch.allclose(kernel(x, b), torch.relu(x + b))

        @pytest.mark.performance
        def test_bench(self, kernel, measure_runtime):
            g = torch.Generator().manual_seed(1)
            sets = [[torch.randn(256, 512, generator=g), torch.randn(512, generator=g)] for _ in range(3)]
            measure_runtime(kernel, lambda: None, args=sets, kwargs=len(sets) * [{}])
''')

TASKS = {
    "torch": (TORCH_TASK, {}, "task.py::TestTorchList::test_bench"),
    "numpy": (NUMPY_TASK, {}, "task.py::TestNumpyList::test_bench"),
    "executor": (EXECUTOR_TASK, {"sides.py": SIDES}, "task.py::TestExecutorList::test_bench"),
}


@pytest.fixture(scope="module", params=sorted(TASKS))
def task(request, tmp_path_factory):
    text, files, bench = TASKS[request.param]
    return write_task(tmp_path_factory.mktemp(f"list_{request.param}") / "task", text, files), bench


def run(task_dir, *args, **env):
    proc, report = run_task_pytest(task_dir, "-m", "performance", *args,
                                   env=task_env(KF_THREADS="1", KERNELFOUNDRY_MEASURE_OPTIONS=FAST_MEASURE, **env))
    assert report is not None, proc.stdout[-3000:]
    return proc, report


def test_paired_list_inputs_are_measured_as_a_pair(task):
    task_dir, bench = task
    proc, report = run(task_dir, "--kf-paired", f"--kf-paired-options={PAIRED_FAST}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "dictionary update sequence" not in proc.stdout
    rec = report["paired"][bench]
    assert rec["paired"] is True and rec["status"] in ("correct", "noisy"), rec
    assert rec["ci"][0] <= rec["speedup"] <= rec["ci"][1] and rec["rounds"] >= 8 and rec["checked_rounds"] >= 3
    assert len(report["runtimes"][bench]) == rec["rounds"] == len(report["reference_runtimes"][bench])
    assert [t["status"] for t in report["tests"]] == ["passed"] and [t["status"] for t in report["reference_tests"]] == [
        "passed"]


def test_plain_list_inputs_rotate_every_set(task):
    task_dir, bench = task
    proc, report = run(task_dir)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(report["runtimes"][bench]) >= 10 and all(v > 0 for v in report["runtimes"][bench])
    assert "input sets rotating" in proc.stdout  # the live log says so


@pytest.mark.parametrize("cheat, status", [("pointer_cache", "output_changed_under_timing"),
                                           ("in_place", "input_mutated")])
def test_cheats_are_still_caught_with_rotating_sets(tmp_path, cheat, status):
    task_dir = write_task(tmp_path / "cheat", TORCH_TASK)
    _, report = run(task_dir, "--kf-paired", f"--kf-paired-options={PAIRED_FAST}", CHEAT=cheat)
    rec = report["paired"]["task.py::TestTorchList::test_bench"]
    assert rec["status"] == status, rec


# ---- kf run ----

KF_CONFIG = textwrap.dedent('''
    task_name: tanh_affine_list
    job_name: tanh_affine_list_regression
    task_origin: custom
    language: python
    gpu_arch: cpu
    has_build_step: false
    has_reference_build_step: false
    test_reference: true
    test_timeout: 60
    eval_config:
      profile_custom_model: false
      profile_original_model: false
''')

KF_KERNEL = textwrap.dedent('''
    import numpy as np

    # [EVOLVE_START]
    def tanh_affine(x, scale=1.0, shift=0.0):
        out = np.tanh(x)
        out *= scale
        out += shift
        return out
    # [EVOLVE_END]
''')

KF_TASK = textwrap.dedent('''
    import numpy as np
    import pytest
    from kernelfoundry import TestBase

    # [REFERENCE_START]
    def reference(x, scale=1.0, shift=0.0):
        return np.tanh(x) * scale + shift
    # [REFERENCE_END]

    @pytest.fixture(scope="session")
    def kernel(use_reference):
        if use_reference:
            return reference
        from kernel import tanh_affine
        return tanh_affine

    class TestTanhAffine(TestBase):
        def test_values(self, kernel):
            x = np.linspace(-3, 3, 101)
            np.testing.assert_allclose(kernel(x, scale=2.0, shift=1.0), reference(x, scale=2.0, shift=1.0))

        @pytest.mark.performance
        def test_benchmark(self, kernel, measure_runtime):
            rng = np.random.default_rng(0)
            args = [(rng.standard_normal(50000),) for _ in range(4)]
            measure_runtime(kernel, lambda: None, args=args, kwargs=[{"scale": 2.0, "shift": 0.5}] * len(args))
''')


def assert_paired_speedup(code: int, verdict: dict, out: str, bench: str) -> dict:
    assert code == 0, out[-3000:]
    assert verdict["status"] in ("correct", "noisy"), (verdict["status"], verdict.get("status_detail"))
    assert "no_measurement" not in json.dumps(verdict["status"])
    [row] = [r for r in benchmark_rows(verdict) if r["name"] == bench]
    assert row["paired"] is True and row["speedup"] > 0, row
    low, high = row["speedup_ci"]
    assert 0 < low <= row["speedup"] <= high, row
    return row


def test_kf_run_python_task_with_list_inputs(tmp_path):
    task_dir = write_task(tmp_path / "tanh_affine_list", KF_TASK, {"config.yaml": KF_CONFIG, "kernel.py": KF_KERNEL})
    code, verdict, out = kf_run(task_dir, tmp_path)
    assert_paired_speedup(code, verdict, out, "task.py::TestTanhAffine::test_benchmark")


def test_kf_run_compiled_example_with_list_inputs(tmp_path):
    code, verdict, out = kf_run(REPO / "examples" / "tasks" / "axpby_list_inputs", tmp_path)
    row = assert_paired_speedup(code, verdict, out, "task.py::TestAxpbyListInputs::test_benchmark")
    assert row["speedup"] > 1.0, row  # one fused pass against torch's two temporaries
