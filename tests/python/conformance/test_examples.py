"""The example tasks written from the reference's task-author docs (examples/tasks: a fixture benchmark, a custom
benchmark, list-form inputs, a templated kernel), each run the three documented ways — ``pytest --ref -s
task.py``, ``python task.py`` (builds the kernel), ``pytest -s task.py`` on the built kernel — and through
``kf run`` (a correct verdict and a paired speedup with its interval)."""

from __future__ import annotations

import shutil

import pytest

from compat_util import benchmark_rows, kf_run
from conftest import FAST_MEASURE, REPO, run_py

EXAMPLES = REPO / "examples" / "tasks"
# name: (test class, correctness tests, the candidate's extra pytest options)
CASES = {
    "squared_relu_fixture": ("TestSquaredReluFixture", 5, []),
    "clamp_custom_benchmark": ("TestClampCustomBenchmark", 3, []),
    "axpby_list_inputs": ("TestAxpbyListInputs", 3, []),
    "leaky_relu_templated": ("TestLeakyReluTemplated", 4, ["--is_templated", "--template_params=(16,)"]),
}


def pytest_run(task, *args):
    return run_py(["-m", "pytest", "--color=no", "-p", "no:cacheprovider", *args, "task.py"], cwd=task, timeout=600,
                  KERNELFOUNDRY_MEASURE_OPTIONS=FAST_MEASURE)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_three_documented_ways(name, tmp_path):
    cls, correctness, candidate_args = CASES[name]
    task = tmp_path / name
    shutil.copytree(EXAMPLES / name, task, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    r = pytest_run(task, "--ref", "-s")
    assert r.returncode == 0 and f"{correctness + 1} passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"task.py::{cls}::test_benchmark" in r.stdout  # the benchmark ran (its count is in "passed")
    if name != "clamp_custom_benchmark":  # the measurement helpers log their statistics (live log at INFO)
        assert "[Performance test] Avg:" in r.stdout, r.stdout[-2000:]

    r = run_py(["task.py"], cwd=task, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    built = sorted(task.glob("*.so"))
    assert len(built) == 1 and f"['{built[0]}']" in r.stdout, (built, r.stdout[-500:])

    r = pytest_run(task, "-s", *candidate_args)
    assert r.returncode == 0 and f"{correctness + 1} passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.mark.parametrize("name", sorted(CASES))
def test_kf_run_gives_a_paired_speedup_with_an_interval(name, tmp_path):
    cls, _, _ = CASES[name]
    code, verdict, out = kf_run(EXAMPLES / name, tmp_path)
    assert code == 0 and verdict["correct"] and verdict["status"] in ("correct", "noisy"), out[-3000:]
    [row] = benchmark_rows(verdict)
    assert row["name"] == f"task.py::{cls}::test_benchmark" and row["paired"] is True, row
    low, high = row["speedup_ci"]
    assert 0 < low <= row["speedup"] <= high, row
    if name == "leaky_relu_templated":  # one variant per forward_templated<...> of the EVOLVE block
        assert sorted(verdict["result"]["template_results"]) == ["[16]", "[4]"]
        assert all(v["correctness"] for v in verdict["result"]["template_results"].values())
    if name == "clamp_custom_benchmark":
        record = verdict["result"]["timing"]["paired"][row["name"]]
        assert record["mode"] == "test_calls", record  # its own timing loop: paired by whole test calls
