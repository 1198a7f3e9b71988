"""Conformance: a task that ships its own conftest.py written the reference's way (its own options and fixtures,
calling kernelfoundry.utils.performance with ``output=profile_store[nodeid]``) instead of importing ours, and
custom benchmarks (profile_store + profiler_session). Both run plainly (pytest --ref / --performance-out) and
under kf: the result report reads the task's own store, paired mode gives each side what it says
(``use_reference``), measure_runtime called from a test body is captured and paired, and a benchmark timing its
own loop is paired by whole test calls."""

from __future__ import annotations

import json
import textwrap

import pytest

from compat_util import benchmark_rows, kf_run
from conftest import FAST_MEASURE, run_py, run_task_pytest, task_env, write_task

# Written in the style of the reference's conftest (its own code): options, a dict store dumped at teardown,
# measurement fixtures as partials of kernelfoundry.utils.performance with output= the test's store entry.
OWN_CONFTEST = textwrap.dedent('''
    import json
    from functools import partial
    from pathlib import Path
    import pytest

    def pytest_configure(config):
        config.addinivalue_line("markers", "performance: timed")

    def pytest_addoption(parser):
        parser.addoption("--performance-out", action="store", default=None)
        parser.addoption("--itt", action="store_true", default=False)
        parser.addoption("--ref", action="store_true", default=False)
        parser.addoption("--is_templated", action="store_true", default=False)
        parser.addoption("--template_params", type=str, default=None)
        parser.addoption("--runtime_params", type=str, default=None)

    @pytest.fixture(scope="session")
    def use_reference(request):
        return request.config.getoption("--ref")

    @pytest.fixture(scope="session")
    def profile_store(request):
        store = {}
        yield store
        out = request.config.getoption("--performance-out")
        if out:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            Path(out).write_text(json.dumps(store))

    @pytest.fixture
    def measure_runtime(request, profile_store):
        from kernelfoundry.utils.performance import measure_runtime as measure
        profile_store[request.node.nodeid] = []
        return partial(measure, use_itt=request.config.getoption("--itt"), output=profile_store[request.node.nodeid])
''')

TASK = textwrap.dedent('''
    import time
    import pytest, torch
    from kernelfoundry import TestBase
    from kernelfoundry.eval_pipeline.utils.performance import detect_profiler, measure_runtime, profiler_session

    def reference(x):
        return torch.relu(x) * 2.0

    def candidate(x):
        return torch.clamp_min(x, 0.0) * 2.0

    @pytest.fixture(scope="session")
    def kernel(use_reference):
        return reference if use_reference else candidate

    def inputs():
        return torch.randn(512, 1024, generator=torch.Generator().manual_seed(0))

    class TestOwn(TestBase):
        def test_values(self, kernel):
            x = inputs()
            assert torch.allclose(kernel(x), reference(x))

        @pytest.mark.performance
        def test_fixture_benchmark(self, kernel, measure_runtime):
            measure_runtime(kernel, lambda: None, args=(inputs(),), warmup_min_time=0.02, perf_trials_min_time=0.05)

        @pytest.mark.performance
        def test_module_call_benchmark(self, kernel, profile_store, request):
            samples = measure_runtime(kernel, lambda: None, args=(inputs(),), warmup_min_time=0.02,
                                      perf_trials_min_time=0.05)
            profile_store[request.node.nodeid] = samples

        @pytest.mark.performance
        def test_custom_loop_benchmark(self, kernel, profile_store, request):
            x = inputs()
            kernel(x)
            times = []
            with profiler_session(detect_profiler()):
                for _ in range(10):
                    start = time.perf_counter()
                    kernel(x)
                    times.append((time.perf_counter() - start) * 1e3)
            profile_store[request.node.nodeid] = times
''')

BENCHES = ["task.py::TestOwn::test_fixture_benchmark", "task.py::TestOwn::test_module_call_benchmark",
           "task.py::TestOwn::test_custom_loop_benchmark"]
PAIRED = json.dumps({"budget_s": 2.0, "min_rounds": 6, "target_rel_half_width": 0.05})


@pytest.fixture(scope="module", params=["own_conftest", "star_import"])
def task(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param) / "task"
    task_dir = write_task(root, TASK)
    if request.param == "own_conftest":
        (task_dir / "conftest.py").write_text(OWN_CONFTEST)
    return task_dir


def test_runs_plainly_as_the_docs_show(task, tmp_path):
    r = run_py(["-m", "pytest", "--color=no", "-p", "no:cacheprovider", "--ref", "-s", "task.py"], cwd=task,
               KERNELFOUNDRY_MEASURE_OPTIONS=FAST_MEASURE)
    assert r.returncode == 0 and "4 passed" in r.stdout, r.stdout[-3000:] + r.stderr
    out = tmp_path / "rt.json"
    r = run_py(["-m", "pytest", "--color=no", "-p", "no:cacheprovider", "-m", "performance",
                f"--performance-out={out}", "task.py"], cwd=task)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    runtimes = json.loads(out.read_text())
    assert sorted(runtimes) == sorted(BENCHES) and all(len(v) >= 10 for v in runtimes.values()), runtimes


def test_kf_reads_the_tasks_store_and_pairs_every_benchmark(task):
    proc, report = run_task_pytest(task, "-p", "kernelfoundry.plugin", "-m", "performance", "--kf-paired",
                                   f"--kf-paired-options={PAIRED}", env=task_env(KF_THREADS="1"))
    assert proc.returncode == 0 and report, proc.stdout[-3000:]
    assert sorted(t["name"] for t in report["tests"]) == sorted(b.split("::", 1)[1] for b in BENCHES)
    assert sorted(report["runtimes"]) == sorted(BENCHES)  # the plain ids only: no side-suffixed entries
    for bench in BENCHES:
        rec = report["paired"][bench]
        assert rec["paired"] is True and rec["status"] in ("correct", "noisy"), (bench, rec)
        assert rec["ci"][0] <= rec["speedup"] <= rec["ci"][1] and 0.3 < rec["speedup"] < 3.0, (bench, rec)
        assert len(report["runtimes"][bench]) == rec["rounds"] == len(report["reference_runtimes"][bench])
    # Captured call by call (value sets, checked outputs) where measure_runtime is called, by any path ...
    for bench in BENCHES[:2]:
        assert report["paired"][bench]["checked_rounds"] >= 3 and "mode" not in report["paired"][bench]
    # ... and by whole test calls where the test times its own loop.
    custom = report["paired"][BENCHES[2]]
    assert custom["mode"] == "test_calls" and custom["rounds"] >= 2 and "paired by whole test calls" in custom["detail"]


def test_the_reference_side_really_runs_the_reference(tmp_path):
    # A task whose own use_reference ignores the side (the reference's returns --ref): kf gives it the side.
    task_dir = write_task(tmp_path / "sides", TASK.replace("return torch.clamp_min(x, 0.0) * 2.0",
                                                           "return torch.relu(torch.relu(x) * 2.0) + 0.0 * x"))
    (task_dir / "conftest.py").write_text(OWN_CONFTEST)
    proc, report = run_task_pytest(task_dir, "-p", "kernelfoundry.plugin", "-m", "performance", "-k", "fixture",
                                   "--kf-paired", f"--kf-paired-options={PAIRED}", env=task_env(KF_THREADS="1"))
    rec = report["paired"][BENCHES[0]]
    assert rec["speedup"] < 0.9, rec  # the candidate does twice the work; without the side it would be ~1


KF_CONFIG = textwrap.dedent('''
    task_name: own_conftest_relu
    job_name: own_conftest_regression
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


def test_kf_run_on_a_task_with_its_own_conftest(tmp_path):
    text = TASK.replace("def candidate(x):\n    return torch.clamp_min(x, 0.0) * 2.0\n",
                        "# [EVOLVE_START]\ndef candidate(x):\n    return torch.clamp_min(x, 0.0) * 2.0\n# [EVOLVE_END]\n")
    assert "[EVOLVE_START]" in text
    task_dir = write_task(tmp_path / "own_conftest_relu", text, {"config.yaml": KF_CONFIG})
    (task_dir / "conftest.py").write_text(OWN_CONFTEST)
    code, verdict, out = kf_run(task_dir, tmp_path)
    assert code == 0 and verdict["status"] in ("correct", "noisy"), out[-3000:]
    rows = {r["name"]: r for r in benchmark_rows(verdict)}
    assert sorted(rows) == sorted(BENCHES), rows
    for row in rows.values():
        assert row["paired"] is True and row["speedup_ci"][0] <= row["speedup"] <= row["speedup_ci"][1], row
