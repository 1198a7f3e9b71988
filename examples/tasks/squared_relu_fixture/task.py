"""Example task squared_relu_fixture: y = relu(x)^2, a C++ (OpenMP) CPU torch extension against torch.

The benchmark is the documented simplest form: the ``measure_runtime_torch`` fixture with the device and the
inputs. Run it the three documented ways:
    pytest --ref -s task.py        # the tests against the reference
    python task.py                 # build the kernel (squared_relu_kernel.so beside this file)
    pytest -s task.py              # the tests against the built kernel
and through kf: ``kf run examples/tasks/squared_relu_fixture``.
"""

import importlib
import sys
from pathlib import Path

import pytest
import torch

from kernelfoundry import TestBase
from kernelfoundry.testing import all_close_with_slack, assert_allclose, cosine_similarity

TASK_DIR = Path(__file__).parent
EXTENSION_NAME = "squared_relu_kernel"
SHAPES = [(1,), (3, 17), (64, 1000), (256, 1024)]


# [REFERENCE_START]
def reference_squared_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.square(torch.relu(x))
# [REFERENCE_END]

# [USER_INSTRUCTIONS_START]
# Implement squared_relu(x) = relu(x)^2 for a float32 CPU tensor of any shape. OpenMP is available. Return a new
# tensor of x's shape and dtype; do not modify the input.
# [USER_INSTRUCTIONS_END]


@pytest.fixture(scope="session")
def device():
    return torch.device("cpu")


@pytest.fixture(scope="session")
def kernel(use_reference):
    if use_reference:
        return reference_squared_relu
    if str(TASK_DIR) not in sys.path:
        sys.path.insert(0, str(TASK_DIR))
    return importlib.import_module(EXTENSION_NAME).squared_relu


def make_input(shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)


class TestSquaredReluFixture(TestBase):
    def build(self, gpu_arch, **buildtime_params):
        return self.compile_torch_extension(
            extension_name=EXTENSION_NAME,
            src=TASK_DIR / "squared_relu_kernel.cpp",
            output_dir=TASK_DIR,
            gpu_arch=gpu_arch,
            extra_cflags=["-O3", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
        )

    @pytest.mark.parametrize("shape", SHAPES)
    def test_matches_reference(self, kernel, shape):
        x = make_input(shape, seed=len(shape) * 7919 + shape[-1])
        x_copy = x.clone()
        out = kernel(x)
        assert out.shape == x.shape and out.dtype == x.dtype
        assert_allclose(out, reference_squared_relu(x_copy), rtol=1e-5)
        assert torch.equal(x, x_copy), "the input was modified"

    def test_slack_and_similarity(self, kernel):
        x = make_input((128, 512), seed=3)
        out, expected = kernel(x), reference_squared_relu(x)
        assert all_close_with_slack(expected, out, max_rel_err=1e-4)
        assert cosine_similarity(expected, out)

    @pytest.mark.performance
    def test_benchmark(self, kernel, device, measure_runtime_torch):
        x = make_input((1024, 2048), seed=0)
        measure_runtime_torch(kernel, device, args=(x,))


if __name__ == "__main__":
    # `python task.py` builds the kernel for this machine, as kf's build stage does with config.yaml's gpu_arch.
    print(TestSquaredReluFixture().build(gpu_arch=TestBase.get_machine_gpu_arch()))
