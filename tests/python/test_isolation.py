"""The candidate's modules out of the test process (kernelfoundry.isolation, ``--kf-isolate``) and the guard of the
paired timing that still shares one (kernelfoundry.integrity): a candidate imported under the guard behaves as
imported (functions, classes, objects, numpy, strides, in-place writes, exceptions, ``import *``) but runs in
another process; the attacks that reached the checker from candidate code (2026-12-05) fail."""

from __future__ import annotations

import shutil
import textwrap

import pytest

from conftest import REPO, run_task_pytest, task_env, write_task
from conformance.compat_util import kf_run

KERNEL = textwrap.dedent('''
    import os
    import numpy as np
    import torch

    # [EVOLVE_START]
    CONST = 3

    def where():
        return os.getpid()

    def scale(x, k=2.0):
        return x * k

    def scale_np(x):
        return x * 2.0

    def fails():
        raise ValueError("bad input")

    def double_into(out, x):
        out.copy_(x * 2)

    def strides(x):
        return list(x.stride()), x.sum()

    def stats(x):
        return {"sum": x.sum(), "n": x.numel(), "dtype": x.dtype}

    def grad_enabled():
        return torch.is_grad_enabled()

    class Acc:
        def __init__(self, start=0):
            self.count = start
            self.total = torch.zeros(3)

        def add(self, x):
            self.count += 1
            self.total = self.total + x
            return self
    # [EVOLVE_END]
''')

TASK = textwrap.dedent('''
    import os
    import numpy as np
    import pytest
    import torch

    import kernel
    from kernel import *


    def test_runs_elsewhere():
        assert kernel.where() != os.getpid()


    def test_functions_and_values():
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        assert torch.equal(scale(x), x * 2) and torch.equal(kernel.scale(x, k=3.0), x * 3)
        assert kernel.CONST == 3 and CONST == 3
        assert np.array_equal(kernel.scale_np(np.arange(4.0)), np.arange(4.0) * 2)
        assert not hasattr(kernel, "no_such_name")


    def test_exceptions_keep_their_builtin_type():
        with pytest.raises(ValueError, match="bad input"):
            kernel.fails()


    def test_in_place_writes_and_strides_reach_the_caller():
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        out = torch.zeros(2, 3)
        kernel.double_into(out, x)
        assert torch.equal(out, x * 2)
        strides, total = kernel.strides(x.t())
        assert strides == list(x.t().stride()) and float(total) == 15.0


    def test_containers_objects_and_grad_mode():
        d = kernel.stats(torch.ones(4))
        assert float(d["sum"]) == 4.0 and d["n"] == 4 and d["dtype"] is torch.float32
        acc = kernel.Acc(start=1)
        assert acc.add(torch.ones(3)) is acc  # one object, one stand-in
        acc.add(torch.ones(3))
        assert acc.count == 3 and torch.equal(acc.total, torch.full((3,), 2.0))
        with torch.no_grad():
            assert kernel.grad_enabled() is False
        assert kernel.grad_enabled() is True
''')


def test_a_candidate_module_runs_in_an_executor_and_behaves_as_imported(tmp_path):
    task = write_task(tmp_path / "t", TASK, {"kernel.py": KERNEL})
    proc, report = run_task_pytest(task, "-p", "kernelfoundry.plugin", "--kf-isolate", env=task_env())
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert [t["status"] for t in report["tests"]] == ["passed"] * 5, report["tests"]
    assert report["candidate_process"] == "executor (kernel)"
    # Without the guard the same module is in the test process (the first test fails): the test can tell.
    proc, report = run_task_pytest(task, "-p", "kernelfoundry.plugin", env=task_env())
    assert [t["status"] for t in report["tests"]][0] == "failed" and "candidate_process" not in report



SEEDED_KERNEL = textwrap.dedent('''
    import random
    import numpy as np
    import torch
    import torch.nn as nn

    # [EVOLVE_START]
    class ModelNew(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.lin = nn.Linear(n, n)

        def forward(self, x):
            return self.lin(x)

    def draws(n):
        return torch.randn(n), np.random.rand(n), random.random()
    # [EVOLVE_END]
''')

SEEDED_TASK = textwrap.dedent('''
    import os
    import random
    import numpy as np
    import torch
    import torch.nn as nn

    import kernel
    from kernel import ModelNew


    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.lin = nn.Linear(n, n)

        def forward(self, x):
            return self.lin(x)


    def test_models_seeded_alike_have_equal_weights():  # KernelBench's check
        torch.manual_seed(42)
        ref = Model(8)
        torch.manual_seed(42)
        new = ModelNew(8)
        x = torch.randn(2, 8)
        assert torch.equal(ref(x), new(x))


    def test_one_sequence_of_draws_across_the_two_processes():
        def seed():
            torch.manual_seed(1); np.random.seed(1); random.seed(1)
        seed()
        expected = [torch.randn(4), torch.randn(4), np.random.rand(4), random.random(), torch.randn(4)]
        seed()
        first = torch.randn(4)
        t, a, r = kernel.draws(4)  # in the executor
        assert torch.equal(first, expected[0]) and torch.equal(t, expected[1])
        assert (a == expected[2]).all() and r == expected[3]
        assert torch.equal(torch.randn(4), expected[4])  # the checker draws on after the executor's draws
''')


def test_a_candidate_in_an_executor_draws_from_the_checkers_random_generators(tmp_path):
    # Regression (2026-12-06): with ModelNew built in the executor, `torch.manual_seed(42)` seeded the checker only,
    # the weights differed and an honest KernelBench-style candidate failed; both tests failed, all four draws too.
    task = write_task(tmp_path / "t", SEEDED_TASK, {"kernel.py": SEEDED_KERNEL})
    proc, report = run_task_pytest(task, "-p", "kernelfoundry.plugin", "--kf-isolate", env=task_env())
    assert report["candidate_process"] == "executor (kernel)"
    assert [t["status"] for t in report["tests"]] == ["passed"] * 2, proc.stdout[-4000:]

PATCHING_KERNEL = textwrap.dedent('''
    import torch

    # [EVOLVE_START]
    torch.relu = lambda t: torch.zeros_like(t)  # the reference now returns zeros too

    def relu(x):
        return torch.zeros_like(x)
    # [EVOLVE_END]
''')

PATCHED_TASK = textwrap.dedent('''
    import torch
    from kernel import relu


    def test_matches_reference():
        x = torch.randn(64)
        assert torch.equal(relu(x), torch.relu(x))
''')


def test_a_candidate_that_patches_the_reference_fails_its_correctness_test(tmp_path):
    task = write_task(tmp_path / "t", PATCHED_TASK, {"kernel.py": PATCHING_KERNEL})
    proc, report = run_task_pytest(task, "-p", "kernelfoundry.plugin", env=task_env())
    assert report["tests"][0]["status"] == "passed"  # the attack, in one process
    proc, report = run_task_pytest(task, "-p", "kernelfoundry.plugin", "--kf-isolate", env=task_env())
    assert report["tests"][0]["status"] == "failed", proc.stdout[-3000:]


def test_an_evolve_block_in_the_test_module_is_reported_as_in_the_test_process(tmp_path):
    task = write_task(tmp_path / "t", "# [EVOLVE_START]\ndef test_a():\n    pass\n# [EVOLVE_END]\n")
    proc, report = run_task_pytest(task, "-p", "kernelfoundry.plugin", "--kf-isolate", env=task_env())
    assert proc.returncode == 0
    assert report["candidate_process"] == "test process: the EVOLVE block is in the test module task.py"


SLOWING_KERNEL = textwrap.dedent('''
    import torch

    # [EVOLVE_START]
    _relu = torch.relu
    torch.relu = lambda t: (_relu(t), _relu(t), _relu(t))[2]  # correct values, three times the reference's work

    def relu(x):
        return torch.clamp_min(x, 0.0)
    # [EVOLVE_END]
''')

PAIRED_TASK = textwrap.dedent('''
    import pytest
    import torch


    @pytest.fixture(scope="session")
    def kernel(use_reference):
        if use_reference:
            return lambda x: torch.relu(x)
        from kernel import relu
        return relu


    @pytest.mark.performance
    def test_benchmark(kernel, measure_runtime):
        measure_runtime(kernel, lambda: None, args=(torch.randn(256, 1024),))
''')


def test_a_patch_of_what_the_reference_calls_makes_the_paired_timing_suspicious(tmp_path):
    task = write_task(tmp_path / "t", PAIRED_TASK, {"kernel.py": SLOWING_KERNEL})
    proc, report = run_task_pytest(task, "-p", "kernelfoundry.plugin", "-m", "performance", "--kf-paired",
                                   '--kf-paired-options={"budget_s": 2}', env=task_env(KF_THREADS="1"))
    (record,) = report["paired"].values()
    assert record["status"] == "suspicious", record
    assert "torch.relu was replaced" in record["detail"], record["detail"]


# The README example's task with candidates that attack the checker from C++ (2026-12-05, each scored `correct`
# before: 3.5x for the first two, where the honest kernel scores ~2.3x).
ZERO_AND_PATCH = '''
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    static bool done = [] { PyRun_SimpleString("import torch\\ntorch.relu = lambda t: torch.zeros_like(t)\\n"); return true; }();
    (void)done;
    return torch::zeros_like(x);
}
'''
PATCH_RELU = '''
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    static bool done = [] {
        PyRun_SimpleString("import torch\\n_r = torch.relu\\ntorch.relu = lambda t: (_r(t), _r(t), _r(t))[2]\\n");
        return true;
    }();
    (void)done;
    return torch::relu(x + bias) * scale;
}
'''
DISPATCH_RELU = '''
at::Tensor slow_relu(const at::Tensor& t) {
    at::Tensor out;
    for (int i = 0; i < 3; ++i) out = at::clamp_min(t, 0);
    return out;
}
TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl("relu", slow_relu); }
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    return torch::clamp_min(x + bias, 0) * scale;
}
'''


def _kf_run_bias_relu(tmp_path, candidate: str, config: str):
    """`kf run` of the README example's task, `config` appended to its eval_config, with `candidate` as the
    EVOLVE block: (exit code, result, output)."""
    task = tmp_path / "bias_relu"
    shutil.copytree(REPO / "examples" / "tasks" / "bias_relu", task)
    with open(task / "config.yaml", "a") as f:
        f.write(config)
    source = tmp_path / "candidate.cpp"
    source.write_text(candidate)
    code, verdict, out = kf_run(task, tmp_path, "--candidate", str(source))
    return code, verdict["result"], out


@pytest.mark.parametrize("candidate,status,detail", [
    (ZERO_AND_PATCH, "value_mismatch", "tests failed"),
    (PATCH_RELU, "suspicious", "torch.relu was replaced"),
    (DISPATCH_RELU, "suspicious", "another kernel for aten::relu"),
], ids=["zeros_and_patched_reference", "patched_torch_relu", "kernel_over_aten_relu"])
def test_kf_run_catches_candidates_that_attack_the_reference(candidate, status, detail, tmp_path):
    code, result, out = _kf_run_bias_relu(tmp_path, candidate,
                                          "  timing:\n    budget_s: 4\n    processes: 2\n    max_processes: 2\n")
    assert result["status"] == status, out[-3000:]
    assert detail in result["status_detail"], result["status_detail"]
    assert result["isolation"]["candidate_process"]["correctness"] == "executor (bias_relu_kernel)"
    assert code == 1


def test_a_task_that_keeps_the_candidate_in_the_test_process_is_told_so_and_still_guarded(tmp_path):
    code, result, out = _kf_run_bias_relu(tmp_path, PATCH_RELU,
                                          "  candidate_process: test_process\n  timing:\n    budget_s: 4\n")
    assert result["isolation"]["candidate_process"] == {
        "correctness": "test process: eval_config.candidate_process is test_process",
        "timing": "test process (paired with the reference)"}, result["isolation"]
    assert code == 1
    # Its correctness test passes (the values are right); the paired timing's guard sees the patch.
    assert result["status"] == "suspicious" and "torch.relu was replaced" in result["status_detail"], out[-3000:]
