// Cancellation through the store: a job set to CANCELED by someone else (a web view, the reference's tools, an
// operator with SQL) stops the running evaluation — RecordRun's watcher requests stop on EvaluateOptions::stop,
// Evaluate kills the running test tree — and the job stays CANCELED without a kernels row. Once through the
// library on a hanging candidate, once through `kf run` cancelled by plain SQL from another process.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "kernelfoundry/record.hpp"
#include "pipeline/pipeline_util.hpp"
#include "store/store_backends.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Backend;
using testing::WriteFile;
using Clock = std::chrono::steady_clock;

const char* kTaskPy = R"PY(import pytest

from kernelfoundry import TestBase

import kernel


@pytest.fixture(scope="session")
def impl(use_reference):
    return (lambda xs: [2 * x for x in xs]) if use_reference else kernel.scale


class TestScale(TestBase):
    def test_output_shapes_match(self, impl):
        assert len(impl([1, 2, 3])) == 3

    def test_values(self, impl):
        assert impl([1, 2, 3]) == [2, 4, 6]

    @pytest.mark.performance
    def test_benchmark(self, impl, measure_runtime):
        measure_runtime(impl, lambda: None, args=([1.0] * 64,), auto_replicate_inputs_size=0)
)PY";

/// A candidate whose correctness test hangs for two minutes (test_timeout is 120 s).
const char* kHanging = "import time\n\ndef scale(xs):\n    time.sleep(120)\n    return [2 * x for x in xs]\n";

class CancelTest : public testing::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    testing::UseTestCache();
    dir_ = db_->tmp().path() / "py_hang";
    WriteFile(dir_ / "config.yaml",
              "task_name: py_hang\njob_name: py_hang_test\ntask_origin: custom\nlanguage: python\ngpu_arch: cpu\n"
              "has_build_step: false\nhas_reference_build_step: false\ntest_timeout: 120\n"
              "test_output_inactivity_timeout: 120\n");
    WriteFile(dir_ / "conftest.py", "from kernelfoundry.conftest import *\n");
    WriteFile(dir_ / "kernel.py", "# [EVOLVE_START]\ndef scale(xs):\n    return [2 * x for x in xs]\n# [EVOLVE_END]\n");
    WriteFile(dir_ / "task.py", kTaskPy);
  }
  /// Waits (at most 60 s) until job 1 is RUN and a test process has had a moment to start, then cancels
  /// it with plain SQL, as another program would.
  void CancelJobOneWhenRunning() {
    auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      auto rows = db_->Sql("SELECT status FROM jobs WHERE id = 1");
      if (!rows.empty() && rows[0][0] == "RUN") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the hanging test is running by now
    db_->Sql("UPDATE jobs SET status = 'CANCELED' WHERE id = 1");
  }
  std::filesystem::path dir_;
};

TEST_P(CancelTest, CanceledJobStopsTheEvaluationInTheLibrary) {
  TaskForRun loaded = LoadTaskForRun(dir_.string());
  EvaluateOptions options;
  options.work_root = db_->tmp().path() / "work";
  options.test_reference = false;
  std::thread canceller([this] { CancelJobOneWhenRunning(); });
  auto t0 = Clock::now();
  Evaluation ev;
  RecordedRun rec = EvaluateAndRecord(*store_, loaded.task, BlockUpdate{BlockUpdateShort{{"EVOLVE", kHanging}}},
                                      options, {.cancel_poll = std::chrono::milliseconds(200)}, &ev);
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  canceller.join();
  EXPECT_LT(seconds, 40.0) << "the hanging test (120 s) was not stopped";
  EXPECT_TRUE(rec.canceled);
  EXPECT_EQ(rec.kernel_id, 0);
  EXPECT_EQ(ev.result.status, EvalStatus::kCanceled) << ev.result.status_detail;
  EXPECT_EQ(store_->GetJob(1)["status"], "CANCELED");
  EXPECT_EQ(store_->CountKernels({}), 0);
  EXPECT_TRUE(testing::ProcessesUnder(options.work_root).empty());
}

TEST_P(CancelTest, KfRunStopsWhenItsJobIsCanceled) {
  std::filesystem::path kf = testing::BinaryDir() / "kf";
  if (!std::filesystem::exists(kf)) GTEST_SKIP() << "kf is not built (ninja kf)";
  WriteFile(db_->tmp().path() / "hang.py", kHanging);
  std::pair<int, std::string> result;
  auto t0 = Clock::now();
  std::thread run([&] {
    result = testing::RunShell("KF_CACHE_DIR='" + std::string(std::getenv("KF_CACHE_DIR")) + "' '" + kf.string() +
                               "' run '" + dir_.string() + "' --no-reference --candidate '" +
                               (db_->tmp().path() / "hang.py").string() + "' --db '" + db_->url() + "'");
  });
  CancelJobOneWhenRunning();
  run.join();
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto& [rc, out] = result;
  EXPECT_LT(seconds, 45.0) << out;
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("canceled: job 1 is CANCELED in " + RedactStoreUrl(db_->url()) + "; no verdict was stored"),
            std::string::npos)
      << out;
  EXPECT_EQ(db_->Value("SELECT status FROM jobs WHERE id = 1"), "CANCELED");
  EXPECT_EQ(db_->Value("SELECT count(*) FROM kernels"), "0");
}

INSTANTIATE_TEST_SUITE_P(Backends, CancelTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         testing::BackendParamName());

}  // namespace
}  // namespace kf
