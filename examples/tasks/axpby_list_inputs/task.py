"""Example task axpby_list_inputs: y = alpha * x + beta * w, a C++ (OpenMP) CPU torch extension against torch.

The benchmark uses the reference's documented form for rotating inputs: ``measure_runtime`` with a list of
input sets, ``args=[(x0, w0, a, b), (x1, w1, a, b), ...]`` and ``kwargs=[{}] * n``; call k uses set k mod n (no
replication of list inputs). Run it the documented ways:
    pytest --ref -s task.py        # the tests against the reference
    python task.py                 # build the kernel (axpby_kernel.so beside this file)
    pytest -s task.py              # the tests against the built kernel
and through kf: ``kf run examples/tasks/axpby_list_inputs``.
"""

import importlib
import sys
from pathlib import Path

import pytest
import torch

from kernelfoundry import TestBase
from kernelfoundry.testing import assert_allclose

TASK_DIR = Path(__file__).parent
EXTENSION_NAME = "axpby_kernel"
ALPHA, BETA = 2.0, -0.5
INPUT_SETS = 4


# [REFERENCE_START]
def reference_axpby(x: torch.Tensor, w: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    return alpha * x + beta * w
# [REFERENCE_END]

# [USER_INSTRUCTIONS_START]
# Implement axpby(x, w, alpha, beta) = alpha * x + beta * w for two float32 CPU tensors of the same shape. OpenMP
# is available. Return a new tensor; do not modify the inputs.
# [USER_INSTRUCTIONS_END]


@pytest.fixture(scope="session")
def kernel(use_reference):
    if use_reference:
        return reference_axpby
    if str(TASK_DIR) not in sys.path:
        sys.path.insert(0, str(TASK_DIR))
    return importlib.import_module(EXTENSION_NAME).axpby


def make_pair(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)


class TestAxpbyListInputs(TestBase):
    def build(self, gpu_arch, **buildtime_params):
        return self.compile_torch_extension(
            extension_name=EXTENSION_NAME,
            src=TASK_DIR / "axpby_kernel.cpp",
            output_dir=TASK_DIR,
            gpu_arch=gpu_arch,
            extra_cflags=["-O3", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
        )

    @pytest.mark.parametrize("shape", [(1,), (5, 9), (300, 700)])
    def test_matches_reference(self, kernel, shape):
        x, w = make_pair(shape, seed=sum(shape))
        x_copy, w_copy = x.clone(), w.clone()
        assert_allclose(kernel(x, w, ALPHA, BETA), reference_axpby(x_copy, w_copy, ALPHA, BETA), rtol=1e-4)
        assert torch.equal(x, x_copy) and torch.equal(w, w_copy), "an input was modified"

    @pytest.mark.performance
    def test_benchmark(self, kernel, measure_runtime):
        sets = [(*make_pair((512, 1024), seed=i), ALPHA, BETA) for i in range(INPUT_SETS)]
        measure_runtime(kernel, lambda: None, args=sets, kwargs=[{}] * len(sets))


if __name__ == "__main__":
    # `python task.py` builds the kernel for this machine, as kf's build stage does with config.yaml's gpu_arch.
    print(TestAxpbyListInputs().build(gpu_arch=TestBase.get_machine_gpu_arch()))
