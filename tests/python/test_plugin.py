"""The pytest plugin (kernelfoundry.conftest, spec §4.5) on synthetic tasks: runtimes file, B18, B21,
options and fixtures."""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import FAST_MEASURE, collect_json, run_task_pytest, run_py, task_env, write_task

TASK = textwrap.dedent('''
    import os
    import pytest
    from kernelfoundry import TestBase
    from kernelfoundry.conftest import get_runtime_params_from_argv

    SIZES = get_runtime_params_from_argv().get("sizes", [1])

    def kernel(n, *template):
        return (n, template)

    class TestPlugin(TestBase):
        def test_ref_flag(self, use_reference, pytestconfig):
            assert use_reference == pytestconfig.getoption("ref")

        def test_label(self, request):
            assert os.environ["KERNELFOUNDRY_PROFILE_LABEL"] == request.node.nodeid

        def test_template(self, template_args_wrapper, template_params):
            out = template_args_wrapper(kernel)(3)
            if template_params is None:
                assert out == (3, ())
            else:
                assert out == (3, template_params)
                with open("template_seen.json", "w") as f:
                    f.write(repr(template_params))

        def test_runtime(self, runtime_params):
            with open("runtime_seen.json", "w") as f:
                f.write(repr((runtime_params, SIZES)))

        @pytest.mark.performance
        @pytest.mark.parametrize("n", SIZES)
        def test_bench(self, n, measure_runtime):
            measure_runtime(sum, lambda: None, args=([1.0] * n,))

        @pytest.mark.performance
        def test_bench_torch_style(self, measure_runtime_torch):
            measure_runtime_torch(abs, "cpu", args=(-2,))

        @pytest.mark.performance
        def test_forgot_to_measure(self, measure_runtime):
            pass

        @pytest.mark.performance
        def test_fails_before_measuring(self, measure_runtime):
            raise ValueError("broken kernel")
''')


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return write_task(tmp_path_factory.mktemp("plugin") / "task_plugin", TASK)


def pytest_run(task, *args, **env):
    env.setdefault("KERNELFOUNDRY_MEASURE_OPTIONS", FAST_MEASURE)
    return run_py(["-m", "pytest", "--color=no", "-p", "no:cacheprovider", *args, "task.py"], cwd=task, **env)


def test_runtimes_file_and_unmeasured_benchmark_is_an_error_B18(task):
    out = task / "res" / "runtimes.json"
    r = pytest_run(task, "-m", "performance", f"--performance-out={out}",
                   '--runtime_params={"sizes": [4, 64]}')
    assert r.returncode == 1, r.stdout + r.stderr
    # The benchmark that never measured is an ERROR at teardown with a clear message (B18) ...
    assert "ERROR at teardown of TestPlugin.test_forgot_to_measure" in r.stdout
    assert "never called it: no runtimes were recorded" in r.stdout
    # ... while a benchmark that failed on its own is just FAILED (no second error).
    assert "FAILED task.py::TestPlugin::test_fails_before_measuring" in r.stdout
    assert "ERROR at teardown of TestPlugin.test_fails_before_measuring" not in r.stdout
    assert "[Performance test] Avg:" in r.stdout  # live log at INFO
    runtimes = json.loads(out.read_text())
    assert sorted(runtimes) == ["task.py::TestPlugin::test_bench[4]", "task.py::TestPlugin::test_bench[64]",
                                "task.py::TestPlugin::test_bench_torch_style"]
    for samples in runtimes.values():
        assert len(samples) >= 10 and all(isinstance(v, float) and v > 0 for v in samples)
    assert not [p for p in out.parent.iterdir() if p.name != "runtimes.json"]  # temp + rename


def test_runtimes_file_is_written_even_when_empty(task):
    out = task / "empty.json"
    r = pytest_run(task, "-m", "not performance", f"--performance-out={out}", "-k", "ref_flag or label")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(out.read_text()) == {}


@pytest.mark.parametrize("value", ["(16, -2, 'a_b', True, 1.5)", '[16, -2, "a_b", true, 1.5]'])
def test_template_params_are_data_B21(task, value):
    (task / "template_seen.json").unlink(missing_ok=True)
    r = pytest_run(task, "--is_templated", f"--template_params={value}", "--ref", "-k", "template or ref_flag")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (task / "template_seen.json").read_text() == "(16, -2, 'a_b', True, 1.5)"


def test_malformed_template_params_are_a_usage_error(task):
    r = pytest_run(task, "--is_templated", "--template_params=__import__('os').getcwd()", "-k", "template")
    assert r.returncode == 4 and "--template_params" in r.stderr


def test_runtime_params_fixture_and_argv(task):
    r = pytest_run(task, '--runtime_params={"sizes": [2, 3], "mode": "x"}', "-k", "runtime")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (task / "runtime_seen.json").read_text() == "({'sizes': [2, 3], 'mode': 'x'}, [2, 3])"


def test_bad_measure_options_env_is_a_usage_error(task):
    r = pytest_run(task, "-k", "label", KERNELFOUNDRY_MEASURE_OPTIONS='{"warmup_seconds": 1}')
    assert r.returncode == 4 and "unknown option 'warmup_seconds'" in r.stderr


def test_collect_plugin_and_runner(task, tmp_path):
    r = run_py(["-m", "pytest", "-p", "kernelfoundry.collect", "-p", "no:cacheprovider", "--collect-only", "-q",
                "task.py"], cwd=task)
    assert r.returncode == 0, r.stdout + r.stderr
    data = collect_json(r.stdout)
    assert data["errors"] == [] and data["exitstatus"] == 0
    perf = {t["nodeid"]: t["performance"] for t in data["tests"]}
    assert perf["TestPlugin::test_bench[1]"] is True and perf["TestPlugin::test_label"] is False
    assert list(perf)[:4] == ["TestPlugin::test_ref_flag", "TestPlugin::test_label", "TestPlugin::test_template",
                              "TestPlugin::test_runtime"]

    broken = write_task(tmp_path / "broken", "import does_not_exist_anywhere\n")
    r = run_py(["-m", "kernelfoundry.collect", broken], cwd=tmp_path)
    data = collect_json(r.stdout)
    assert r.returncode == 2 and data["tests"] == []
    assert len(data["errors"]) == 1 and "No module named 'does_not_exist_anywhere'" in data["errors"][0]


def pytest_report(task, *args, **env):
    """Runs pytest with --kf-result-fd on a pipe; returns (CompletedProcess, report dict or None)."""
    env.setdefault("KERNELFOUNDRY_MEASURE_OPTIONS", FAST_MEASURE)
    return run_task_pytest(task, *args, env=task_env(**env), merge_output=False)


def test_result_report_lists_every_test_and_the_runtimes(task):
    r, report = pytest_report(task, "-m", "performance", '--runtime_params={"sizes": [4]}')
    assert r.returncode == 1, r.stdout + r.stderr
    status = {t["name"]: t["status"] for t in report["tests"]}
    assert status == {"TestPlugin::test_bench[4]": "passed", "TestPlugin::test_bench_torch_style": "passed",
                      "TestPlugin::test_forgot_to_measure": "error",
                      "TestPlugin::test_fails_before_measuring": "failed"}
    kinds = {t["kind"] for t in report["tests"]}
    assert kinds == {"performance"}
    assert sorted(report["runtimes"]) == ["task.py::TestPlugin::test_bench[4]",
                                          "task.py::TestPlugin::test_bench_torch_style"]
    assert report["exitstatus"] == 1 and report["elapsed_ms"] > 0
    failed = next(t for t in report["tests"] if t["status"] == "failed")
    assert "broken kernel" in failed["message"]
    # No file is written into the task tree for the runtimes.
    assert not list(task.glob("runtimes*"))


def test_result_report_is_missing_when_the_run_ends_early(tmp_path):
    # issue 10 fault 1: a candidate that _exit(0)s after the first test left "return code 0, no summary".
    early = write_task(tmp_path / "early", textwrap.dedent('''
        import os
        from kernelfoundry import TestBase

        class TestEarly(TestBase):
            def test_a(self):
                pass

            def test_b(self):
                os._exit(0)

            def test_c(self):
                pass
    '''))
    r, report = pytest_report(early, "-m", "not performance")
    assert r.returncode == 0
    assert report is None


def test_result_report_records_skips_and_setup_errors(tmp_path):
    t = write_task(tmp_path / "skips", textwrap.dedent('''
        import pytest
        from kernelfoundry import TestBase

        @pytest.fixture
        def broken():
            raise RuntimeError("fixture exploded")

        class TestSkips(TestBase):
            def test_skip(self):
                pytest.skip("no device")

            def test_setup_error(self, broken):
                pass

            @pytest.mark.xfail(reason="known")
            def test_xfail(self):
                assert False
    '''))
    r, report = pytest_report(t, "-m", "not performance")
    status = {x["name"]: x["status"] for x in report["tests"]}
    assert status == {"TestSkips::test_skip": "skipped", "TestSkips::test_setup_error": "error",
                      "TestSkips::test_xfail": "skipped"}
    assert report["skipped_reason"] == "Skipped: no device"
    assert "fixture exploded" in next(x["message"] for x in report["tests"] if x["status"] == "error")


