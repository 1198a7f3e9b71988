"""Example task clamp_custom_benchmark: y = clamp(x, -1, 1) * 0.5, a C++ (OpenMP) CPU torch extension against
torch.

The benchmark is a CUSTOM one (the reference's docs, "Writing a custom benchmark"): it times its own loop, runs
the timed trials inside ``profiler_session`` (so an external profiler records exactly them) and stores the
per-call milliseconds in the ``profile_store`` fixture under the test's node id. Run it the documented ways:
    pytest --ref -s task.py        # the tests against the reference
    python task.py                 # build the kernel (clamp_kernel.so beside this file)
    pytest -s task.py              # the tests against the built kernel
and through kf: ``kf run examples/tasks/clamp_custom_benchmark`` (paired with the reference by whole test calls).
"""

import importlib
import sys
import time
from pathlib import Path

import pytest
import torch

from kernelfoundry import TestBase
from kernelfoundry.eval_pipeline.utils.performance import detect_profiler, profiler_session
from kernelfoundry.testing import assert_allclose

TASK_DIR = Path(__file__).parent
EXTENSION_NAME = "clamp_kernel"
LO, HI, SCALE = -1.0, 1.0, 0.5
WARMUP_CALLS = 3
TIMED_CALLS = 25


# [REFERENCE_START]
def reference_clamp_scale(x: torch.Tensor, lo: float, hi: float, scale: float) -> torch.Tensor:
    return torch.clamp(x, lo, hi) * scale
# [REFERENCE_END]

# [USER_INSTRUCTIONS_START]
# Implement clamp_scale(x, lo, hi, scale) = clamp(x, lo, hi) * scale for a float32 CPU tensor. OpenMP is
# available. Return a new tensor; do not modify the input.
# [USER_INSTRUCTIONS_END]


@pytest.fixture(scope="session")
def kernel(use_reference):
    if use_reference:
        return reference_clamp_scale
    if str(TASK_DIR) not in sys.path:
        sys.path.insert(0, str(TASK_DIR))
    return importlib.import_module(EXTENSION_NAME).clamp_scale


def make_input(rows, cols, seed):
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=torch.float32) * 2


class TestClampCustomBenchmark(TestBase):
    def build(self, gpu_arch, **buildtime_params):
        return self.compile_torch_extension(
            extension_name=EXTENSION_NAME,
            src=TASK_DIR / "clamp_kernel.cpp",
            output_dir=TASK_DIR,
            gpu_arch=gpu_arch,
            extra_cflags=["-O3", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
        )

    @pytest.mark.parametrize("shape", [(1, 1), (7, 33), (256, 1024)])
    def test_matches_reference(self, kernel, shape):
        x = make_input(*shape, seed=shape[0] * 31 + shape[1])
        x_copy = x.clone()
        assert_allclose(kernel(x, LO, HI, SCALE), reference_clamp_scale(x_copy, LO, HI, SCALE))
        assert torch.equal(x, x_copy), "the input was modified"

    @pytest.mark.performance
    def test_benchmark(self, kernel, profile_store, request):
        x = make_input(1024, 2048, seed=0)
        for _ in range(WARMUP_CALLS):
            kernel(x, LO, HI, SCALE)
        runtimes_ms = []
        with profiler_session(detect_profiler()):
            for _ in range(TIMED_CALLS):
                start = time.perf_counter()
                kernel(x, LO, HI, SCALE)
                runtimes_ms.append((time.perf_counter() - start) * 1e3)
        profile_store[request.node.nodeid] = runtimes_ms


if __name__ == "__main__":
    # `python task.py` builds the kernel for this machine, as kf's build stage does with config.yaml's gpu_arch.
    print(TestClampCustomBenchmark().build(gpu_arch=TestBase.get_machine_gpu_arch()))
