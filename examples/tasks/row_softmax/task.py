"""Example task row_softmax: softmax over the last dimension, C++ CPU torch extension against torch ops."""

import importlib
import sys
from pathlib import Path

import pytest
import torch

from kernelfoundry import TestBase
from kernelfoundry.testing import assert_allclose

TASK_DIR = Path(__file__).parent
EXTENSION_NAME = "softmax_kernel"
SHAPES = [(1, 1), (5, 3), (16, 1000), (256, 4096)]


# [REFERENCE_START]
def reference_softmax(x: torch.Tensor) -> torch.Tensor:
    shifted = x - x.max(dim=1, keepdim=True).values
    e = shifted.exp()
    return e / e.sum(dim=1, keepdim=True)
# [REFERENCE_END]

# [USER_INSTRUCTIONS_START]
# Implement row_softmax(x): softmax over dim 1 of a contiguous float32 CPU matrix, numerically stable for
# large inputs (|x| up to 1e4). OpenMP is available. Return a new tensor; do not modify the input.
# [USER_INSTRUCTIONS_END]


@pytest.fixture(scope="session")
def kernel(use_reference):
    if use_reference:
        return reference_softmax
    if str(TASK_DIR) not in sys.path:
        sys.path.insert(0, str(TASK_DIR))
    return importlib.import_module(EXTENSION_NAME).row_softmax


class TestRowSoftmax(TestBase):
    def build(self, gpu_arch, **buildtime_params):
        return self.compile_torch_extension(
            extension_name=EXTENSION_NAME,
            src=TASK_DIR / "softmax_kernel.cpp",
            output_dir=TASK_DIR,
            gpu_arch=gpu_arch,
            extra_cflags=["-O3", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
        )

    @pytest.mark.parametrize("shape", SHAPES)
    def test_output_shapes_match(self, kernel, shape):
        x = torch.randn(*shape)
        assert kernel(x).shape == x.shape

    @pytest.mark.parametrize("shape", SHAPES)
    def test_matches_reference(self, kernel, shape):
        gen = torch.Generator().manual_seed(shape[0] * 31 + shape[1])
        x = torch.randn(*shape, generator=gen) * 10.0
        assert_allclose(kernel(x.clone()), reference_softmax(x))

    def test_large_magnitudes(self, kernel):
        x = torch.tensor([[1e4, 0.0, -1e4], [-5e3, -5e3, -5e3]], dtype=torch.float32)
        out = kernel(x)
        assert torch.isfinite(out).all()
        assert_allclose(out, reference_softmax(x))

    @pytest.mark.performance
    def test_benchmark(self, kernel, measure_runtime):
        x = torch.randn(512, 4096, generator=torch.Generator().manual_seed(0))
        measure_runtime(kernel, lambda: None, args=(x,), auto_replicate_inputs_size=0)
