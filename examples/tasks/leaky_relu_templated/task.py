"""Example task leaky_relu_templated: y = leaky_relu(x, slope), a templated C++ (OpenMP) CPU torch extension.

The kernel is templated (the reference's form): ``forward_templated<BLOCK>`` instantiations in the EVOLVE block,
and a dispatcher ``forward(x, slope, block)`` whose trailing argument is the template parameter. kf runs one
variant per ``forward_templated<...>`` it finds (``--is_templated --template_params=[4]``, ``[16]``); the
``template_args_wrapper`` fixture appends the variant's parameters to the candidate's calls (without them the
extension's default, 4, applies). Run it the documented ways:
    pytest --ref -s task.py                                         # the tests against the reference
    python task.py                                                  # build the kernel
    pytest -s task.py --is_templated --template_params="(16,)"      # the tests against one variant
and through kf: ``kf run examples/tasks/leaky_relu_templated``.
"""

import importlib
import sys
from pathlib import Path

import pytest
import torch

from kernelfoundry import TestBase
from kernelfoundry.testing import assert_allclose

TASK_DIR = Path(__file__).parent
EXTENSION_NAME = "leaky_relu_kernel"
SLOPE = 0.01


# [REFERENCE_START]
def reference_leaky_relu(x: torch.Tensor, slope: float) -> torch.Tensor:
    return torch.nn.functional.leaky_relu(x, slope)
# [REFERENCE_END]

# [USER_INSTRUCTIONS_START]
# Implement leaky_relu(x, slope) for a float32 CPU tensor of any shape. Template parameters are allowed: write
# forward_templated<...> instantiations and a forward(x, slope, <parameters>) that dispatches to them.
# [USER_INSTRUCTIONS_END]


@pytest.fixture(scope="session")
def kernel(use_reference, template_args_wrapper):
    if use_reference:
        return reference_leaky_relu
    if str(TASK_DIR) not in sys.path:
        sys.path.insert(0, str(TASK_DIR))
    return template_args_wrapper(importlib.import_module(EXTENSION_NAME).forward)


def make_input(shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)


class TestLeakyReluTemplated(TestBase):
    def build(self, gpu_arch, **buildtime_params):
        return self.compile_torch_extension(
            extension_name=EXTENSION_NAME,
            src=TASK_DIR / "leaky_relu_kernel.cpp",
            output_dir=TASK_DIR,
            gpu_arch=gpu_arch,
            extra_cflags=["-O3", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
        )

    @pytest.mark.parametrize("shape", [(3,), (9, 13), (128, 1000), (70, 1000)])  # not multiples of a block too
    def test_matches_reference(self, kernel, shape):
        x = make_input(shape, seed=shape[-1])
        x_copy = x.clone()
        assert_allclose(kernel(x, SLOPE), reference_leaky_relu(x_copy, SLOPE))
        assert torch.equal(x, x_copy), "the input was modified"

    @pytest.mark.performance
    def test_benchmark(self, kernel, measure_runtime):
        x = make_input((1024, 2048), seed=0)
        measure_runtime(kernel, lambda: None, args=(x, SLOPE))


if __name__ == "__main__":
    # `python task.py` builds the kernel for this machine, as kf's build stage does with config.yaml's gpu_arch.
    print(TestLeakyReluTemplated().build(gpu_arch=TestBase.get_machine_gpu_arch()))
