"""Example GPU task triton_bias_relu: y = relu(x + bias) * scale, a Triton kernel against torch."""

import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

from kernelfoundry import TestBase
from kernelfoundry.testing import assert_allclose

TASK_DIR = Path(__file__).parent
# Triton writes its compiled kernels to a cache directory (default ~/.triton/cache); a contained task run may write
# only below its run directory, so the cache lives there.
os.environ.setdefault("TRITON_CACHE_DIR", str(TASK_DIR / ".triton_cache"))
MODULE_NAME = "bias_relu_triton"
SHAPES = [(1, 1), (3, 17), (64, 1000), (512, 2048)]
BENCH_SHAPE = (8192, 8192)  # 256 MiB per tensor: several times the L2, one launch well past launch overhead
SCALE = 0.5

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")



# [REFERENCE_START]
def reference_bias_relu(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.relu(x + bias) * scale
# [REFERENCE_END]

# [USER_INSTRUCTIONS_START]
# Implement bias_relu(x, bias, scale) = relu(x + bias) * scale for a contiguous float32 CUDA matrix x of shape
# (rows, cols) and a bias of shape (cols) in bias_relu_triton.py with Triton (@triton.jit). Return a new tensor;
# do not modify the inputs. Work must be complete when the device is synchronised.
# [USER_INSTRUCTIONS_END]


@pytest.fixture(scope="session")
def kernel(use_reference):
    if use_reference:
        return reference_bias_relu
    if str(TASK_DIR) not in sys.path:
        sys.path.insert(0, str(TASK_DIR))
    pytest.importorskip("triton")
    return importlib.import_module(MODULE_NAME).bias_relu


def make_inputs(rows, cols, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(rows, cols, generator=gen, dtype=torch.float32, device="cuda")
    bias = torch.randn(cols, generator=gen, dtype=torch.float32, device="cuda")
    return x, bias


class TestTritonBiasRelu(TestBase):
    @pytest.mark.parametrize("shape", SHAPES)
    def test_output_shapes_match(self, kernel, shape):
        x, bias = make_inputs(*shape, seed=1)
        assert kernel(x, bias, SCALE).shape == x.shape

    @pytest.mark.parametrize("shape", SHAPES)
    def test_matches_reference(self, kernel, shape):
        x, bias = make_inputs(*shape, seed=shape[0] * 7919 + shape[1])
        x_copy, bias_copy = x.clone(), bias.clone()
        out = kernel(x, bias, SCALE)
        torch.cuda.synchronize()
        assert_allclose(out, reference_bias_relu(x_copy, bias_copy, SCALE))
        assert torch.equal(x, x_copy) and torch.equal(bias, bias_copy), "an input was modified"

    @pytest.mark.performance
    def test_benchmark(self, kernel, measure_runtime):
        x, bias = make_inputs(*BENCH_SHAPE, seed=0)
        # Only the current stream: the timing loop adds the whole-device synchronisation (all streams).
        measure_runtime(kernel, torch.cuda.current_stream().synchronize, args=(x, bias, SCALE),
                        auto_replicate_inputs_size=0)
