// `kf validate --run`'s low-signal check (issue 9): the reference's correctness tests are run with their
// value checks fed an all-zeros and a constant output; a test whose check accepts such an output is named in
// a WARNING line. Here a pure-Python task (no build step, quick) with one loose and one strict check.
#include <gtest/gtest.h>

#include <string>

#include "test_util.hpp"

namespace kf {
namespace {

using testing::TempDir;
using testing::WriteFile;

const char* kTaskPy = R"PY(import pytest

from kernelfoundry import TestBase
from kernelfoundry.testing import assert_allclose

import kernel


def reference_tiny(xs):
    # [REFERENCE_START]
    return [1e-4 * (1.0 + x) for x in xs]
    # [REFERENCE_END]


@pytest.fixture(scope="session")
def impl(use_reference):
    return reference_tiny if use_reference else kernel.tiny


class TestTiny(TestBase):
    def test_output_shapes_match(self, impl):
        assert len(impl([1.0, 2.0, 3.0])) == 3

    def test_loose(self, impl):
        # absolute slack of 1e-2 on outputs of ~1e-4: an all-zeros output passes
        assert_allclose(impl([0.5, 1.5, 2.5]), reference_tiny([0.5, 1.5, 2.5]), epsilon=1.0, rtol=1e-2)

    def test_strict(self, impl):
        assert_allclose(impl([0.5, 1.5, 2.5]), reference_tiny([0.5, 1.5, 2.5]))

    @pytest.mark.performance
    def test_benchmark(self, impl, measure_runtime):
        measure_runtime(impl, lambda: None, args=([1.0] * 64,), auto_replicate_inputs_size=0)
)PY";

TEST(ValidateLowSignal, LooseCheckIsNamedAndStrictOneIsNot) {
  TempDir tmp;
  const auto dir = tmp.path() / "tiny";
  WriteFile(dir / "config.yaml",
            "task_name: tiny\njob_name: tiny_low_signal\ntask_origin: custom\nlanguage: python\n"
            "gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\ntest_timeout: 120\n"
            "eval_config:\n  warmup_min_time: 0.05\n  perf_trials_min_time: 0.2\n");
  WriteFile(dir / "conftest.py", "from kernelfoundry.conftest import *\n");
  WriteFile(dir / "kernel.py", "# [EVOLVE_START]\ndef tiny(xs):\n    return [1e-4 * (1.0 + x) for x in xs]\n"
                               "# [EVOLVE_END]\n");
  WriteFile(dir / "task.py", kTaskPy);
  const std::string kf = (testing::BinaryDir() / "kf").string();
  auto [rc, out] = testing::RunShell("KF_TIMING_BUDGET_S=2 '" + kf + "' validate '" + dir.string() +
                                     "' --run --no-store 2>&1");
  EXPECT_EQ(rc, 0) << out;  // warnings never fail the validation
  EXPECT_NE(out.find("low-signal check"), std::string::npos) << out;
  EXPECT_NE(out.find("WARNING: task.py::TestTiny::test_loose passes with an all-zeros output"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("test_strict passes"), std::string::npos) << out;
  EXPECT_EQ(out.find("test_output_shapes_match passes"), std::string::npos) << out;
}

}  // namespace
}  // namespace kf
