"""omp_reduction as a pytest task: sum(x**2) of 4 Mi float32 values (double accumulation), C++ (OpenMP)."""

import importlib
import math
import sys
from pathlib import Path

import pytest
import torch

from kernelfoundry import TestBase
from kernelfoundry.testing import assert_allclose

TASK_DIR = Path(__file__).parent
EXTENSION_NAME = "reduce_kernel"
N = 1 << 22


# [REFERENCE_START]
def reference_sum_squares(x: torch.Tensor) -> float:
    return float((x.double() ** 2).sum())
# [REFERENCE_END]


@pytest.fixture(scope="session")
def kernel(use_reference):
    if use_reference:
        return reference_sum_squares
    if str(TASK_DIR) not in sys.path:
        sys.path.insert(0, str(TASK_DIR))
    return importlib.import_module(EXTENSION_NAME).sum_squares


def make_input(n, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=gen, dtype=torch.float32) * 2 - 1


class TestReduction(TestBase):
    def build(self, gpu_arch, **buildtime_params):
        return self.compile_torch_extension(
            extension_name=EXTENSION_NAME,
            src=TASK_DIR / "reduce_kernel.cpp",
            output_dir=TASK_DIR,
            gpu_arch=gpu_arch,
            extra_cflags=["-O3", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
        )

    def test_output_shapes_match(self, kernel):
        # One finite number; the value is test_values_match's business (a wrong sum is a value mismatch).
        got = kernel(torch.ones(17))
        assert isinstance(got, float) and math.isfinite(got), f"expected one finite float, got {got!r}"

    def test_values_match(self, kernel):
        x = make_input(N, seed=1)
        assert_allclose(torch.tensor([kernel(x)], dtype=torch.float64),
                        torch.tensor([reference_sum_squares(x)], dtype=torch.float64), rtol=1e-4)

    @pytest.mark.performance
    def test_benchmark(self, kernel, measure_runtime):
        x = make_input(N, seed=0)
        measure_runtime(kernel, lambda: None, args=(x,), auto_replicate_inputs_size=0)
