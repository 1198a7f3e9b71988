"""Conformance: every fixture and pytest option of the reference's kernelfoundry/conftest.py (all stored versions)
with its call forms, on a synthetic task that keeps the shipped ``from kernelfoundry.conftest import *``:
use_reference (--ref), profile_store, profiler_test_label, measure_runtime / measure_runtime_torch / torch_profile
(every argument form), measure_runtime_benchdnn / check_correctness_benchdnn, template_args_wrapper
(--is_templated --template_params), --runtime_params with get_runtime_params_from_argv, --performance-out,
--itt and the cleanup fixture (unitrace --stop at session end)."""

from __future__ import annotations

import json
import textwrap

import pytest

from compat_util import fake_tool
from conftest import FAST_MEASURE, run_py, write_task

TASK = textwrap.dedent('''
    import json, os, time
    import pytest, torch
    from kernelfoundry import TestBase
    from kernelfoundry.conftest import get_runtime_params_from_argv

    RUNTIME = get_runtime_params_from_argv()   # at collection time, as the docs say
    BENCHDNN = os.environ.get("FAKE_BENCHDNN", "benchdnn")
    X = torch.arange(64, dtype=torch.float32)

    def kernel(x, *template):
        return x * (template[0] if template else 2)

    def record(name, value):
        with open(f"seen_{name}.json", "w") as f:
            json.dump(value, f)

    class TestFixtures(TestBase):
        def test_use_reference(self, use_reference, pytestconfig):
            assert isinstance(use_reference, bool) and use_reference == pytestconfig.getoption("--ref")
            record("use_reference", use_reference)

        def test_profiler_test_label(self, request):
            assert os.environ["KERNELFOUNDRY_PROFILE_LABEL"] == request.node.nodeid

        def test_template_args_wrapper(self, template_args_wrapper):
            record("template", template_args_wrapper(kernel)(torch.ones(2)).tolist())

        def test_runtime_params(self, request):
            params = json.loads(request.config.getoption("--runtime_params") or "{}")   # the docs' form
            assert params == RUNTIME
            record("runtime", params)

        def test_check_correctness_benchdnn(self, check_correctness_benchdnn):
            assert check_correctness_benchdnn(BENCHDNN, "--matmul", "2x3:3x4") is True

        @pytest.mark.performance
        def test_single_tuple(self, measure_runtime):
            assert len(measure_runtime(kernel, lambda: None, args=(X,))) >= 1  # 1 under a profiler

        @pytest.mark.performance
        def test_single_list(self, measure_runtime):
            measure_runtime(torch.add, lambda: None, args=[X, X])   # positional arguments as a list

        @pytest.mark.performance
        def test_kwargs_only(self, measure_runtime):
            measure_runtime(lambda x: x + 1, lambda: None, kwargs={"x": X})

        @pytest.mark.performance
        def test_input_set_lists(self, measure_runtime):
            measure_runtime(kernel, lambda: None, args=[(X,), (X + 1,), (X + 2,)], kwargs=3 * [{}])

        @pytest.mark.performance
        def test_positional_and_options(self, measure_runtime, profile_store, request):
            assert profile_store[request.node.nodeid] == []   # registered by the fixture, as the reference does
            out = []
            got = measure_runtime(kernel, lambda: None, (X,), {}, auto_replicate_inputs_size=0, output=out,
                                  info_str="dev cpu,", warmup_min_iters=3)
            assert out == got and profile_store[request.node.nodeid] == got   # visible during the test

        @pytest.mark.performance
        def test_torch_device_forms(self, measure_runtime_torch):
            measure_runtime_torch(kernel, "cpu", args=(X,))
            measure_runtime_torch(kernel, torch.device("cpu"), args=[X], auto_replicate_inputs_size=0)

        @pytest.mark.performance
        def test_torch_profile(self, torch_profile):
            torch_profile(kernel, torch.device("cpu"), args=(X,))

        @pytest.mark.performance
        def test_custom_profile_store(self, profile_store, request):
            profile_store[request.node.nodeid] = [1.5, 1.25]

        @pytest.mark.performance
        def test_benchdnn(self, measure_runtime_benchdnn):
            assert measure_runtime_benchdnn(BENCHDNN, "--matmul", "2x3:3x4") == [0.125]
''')

BENCHDNN = textwrap.dedent('''\
    #!/bin/sh
    echo "$@" >> "$BENCHDNN_LOG"
    case "$1" in
      --mode=c) echo "0:PASSED __REPRO: --matmul 2x3:3x4";;
      --mode=p) printf 'perf,name,avg_time\\nperf,matmul,0.125\\n';;
    esac
''')

PERF_IDS = ["test_single_tuple", "test_single_list", "test_kwargs_only", "test_input_set_lists",
            "test_positional_and_options", "test_torch_device_forms", "test_torch_profile",
            "test_custom_profile_store", "test_benchdnn"]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("fixtures")
    tool = root / "benchdnn"
    tool.write_text(BENCHDNN)
    tool.chmod(0o755)
    return write_task(root / "task", TASK)


def pytest_run(task, *args, **env):
    env.setdefault("KERNELFOUNDRY_MEASURE_OPTIONS", FAST_MEASURE)
    env.setdefault("FAKE_BENCHDNN", str(task.parent / "benchdnn"))
    env.setdefault("BENCHDNN_LOG", str(task.parent / "benchdnn.log"))
    return run_py(["-m", "pytest", "--color=no", "-p", "no:cacheprovider", "-s", *args, "task.py"], cwd=task, **env)


def seen(task, name):
    return json.loads((task / f"seen_{name}.json").read_text())


def test_correctness_fixtures_plain_and_with_the_options(task):
    r = pytest_run(task, "-m", "not performance")
    assert r.returncode == 0 and "5 passed" in r.stdout, r.stdout + r.stderr
    assert seen(task, "use_reference") is False and seen(task, "template") == [2.0, 2.0]
    assert seen(task, "runtime") == {}
    r = pytest_run(task, "-m", "not performance", "--ref", "--is_templated", "--template_params=(3,)",
                   '--runtime_params={"batch_size": 8}')
    assert r.returncode == 0, r.stdout + r.stderr
    assert seen(task, "use_reference") is True and seen(task, "template") == [3.0, 3.0]
    assert seen(task, "runtime") == {"batch_size": 8}
    log = (task.parent / "benchdnn.log").read_text().splitlines()
    assert log[-1] == "--mode=c --matmul --reset --perf-template=csv --global-impl=sycl:ref:any 2x3:3x4"


def test_every_measurement_form_reaches_the_runtimes_file(task, tmp_path):
    out = tmp_path / "sub" / "runtimes.json"  # parent directories are created
    r = pytest_run(task, "-m", "performance", f"--performance-out={out}", "-W", "error::UserWarning")
    assert r.returncode == 0 and f"{len(PERF_IDS)} passed" in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]
    runtimes = json.loads(out.read_text())
    assert sorted(runtimes) == sorted(f"task.py::TestFixtures::{name}" for name in PERF_IDS)
    assert runtimes["task.py::TestFixtures::test_custom_profile_store"] == [1.5, 1.25]
    assert runtimes["task.py::TestFixtures::test_benchdnn"] == [0.125]
    for name in ("test_single_tuple", "test_input_set_lists", "test_torch_profile"):
        values = runtimes[f"task.py::TestFixtures::{name}"]
        assert len(values) >= 10 and all(isinstance(v, float) and v > 0 for v in values), (name, values)
    # Two measurements in one test: both recorded under its id.
    assert len(runtimes["task.py::TestFixtures::test_torch_device_forms"]) >= 20
    assert "[Performance test] dev cpu, warm up" in r.stdout  # info_str, in the live log at INFO
    assert "[Performance test] Using device: cpu, warm up" in r.stdout  # measure_runtime_torch's own info_str
    assert "input sets rotating" in r.stdout
    assert "torch_profile fixture is deprecated" in r.stdout


def test_itt_option_and_cleanup_stop_the_unitrace_session(task, tmp_path):
    log = tmp_path / "unitrace.log"
    cmd = fake_tool(tmp_path / "unitrace", log)
    r = pytest_run(task, "-m", "performance", "-k", "single_tuple", "--itt", KERNELFOUNDRY_unitrace_cmd=str(cmd),
                   UNITRACE_Session="SESSION7")
    assert r.returncode == 0, r.stdout + r.stderr
    assert log.read_text().splitlines()[-1] == "--stop SESSION7"  # the cleanup fixture, at session end
    r = pytest_run(task, "-m", "performance", "-k", "single_tuple", "--itt", KERNELFOUNDRY_unitrace_cmd=str(cmd),
                   UNITRACE_Session="SESSION8", KERNELFOUNDRY_PROFILER="unitrace")
    assert r.returncode == 0, r.stdout + r.stderr
    # Under the profiler the timed trials are resumed/paused, and the session stopped at the end.
    assert log.read_text().splitlines()[-3:] == ["--resume SESSION8", "--pause SESSION8", "--stop SESSION8"]


def test_options_are_listed_in_help(task):
    r = pytest_run(task, "--help")
    for option in ("--performance-out", "--ref", "--itt", "--is_templated", "--template_params",
                   "--runtime_params", "--kf-result-fd", "--kf-paired"):
        assert option in r.stdout, option
