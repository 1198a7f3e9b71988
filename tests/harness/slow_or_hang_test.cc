// The slow_or_hang fixture end to end (golden slow_or_hang_runs.json, with the reference's bugs fixed):
// a hanging test ends at its limit with a typed status and its output so far kept; 2 MiB of ANSI/invalid
// UTF-8 and a 200 kB line pass; a passing run returns as soon as pytest exits (no fixed grace); nothing
// keeps running afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "kernelfoundry/evaluate.hpp"
#include "pipeline/pipeline_util.hpp"

namespace kf {
namespace {

using testing::TempDir;

class SlowOrHang : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::UseTestCache();
    dir_ = testing::CopyFixture("slow_or_hang", tmp_.path());
  }
  // Replaces config.yaml: the fixture's keys plus `timeouts` (duplicate YAML keys are errors).
  void SetConfig(const std::string& timeouts) {
    std::ofstream(dir_ / "config.yaml") << "task_name: slow_or_hang\njob_name: slow_or_hang_fixture\n"
                                           "task_origin: custom\nlanguage: python\ngpu_arch: cpu\n"
                                           "has_build_step: false\nhas_reference_build_step: false\n"
                                           "test_reference: false\n"
                                        << timeouts;
  }
  Evaluation Run(const std::string& mode) {
    Task task = testing::LoadTestTask(dir_);
    EvaluateOptions o;
    o.work_root = tmp_.path() / "work";
    return Evaluate(task, BlockUpdate{BlockUpdateShort{{"EVOLVE", "MODE = \"" + mode + "\"\n"}}}, o);
  }
  void ExpectNothingLeft() { EXPECT_TRUE(testing::ProcessesUnder(tmp_.path() / "work").empty()); }

  TempDir tmp_;
  std::filesystem::path dir_;
};

// Golden hang_inactivity: test_output_inactivity_timeout 8 -> "Process killed due to inactivity", perf 2.
TEST_F(SlowOrHang, HangEndsAtInactivityLimitWithOutputKept) {
  auto t0 = std::chrono::steady_clock::now();
  Evaluation ev = Run("hang");
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(ev.result.status, EvalStatus::kTestTimeout);
  EXPECT_EQ(ev.result.perf_score, 2);
  EXPECT_EQ(ev.result.ReferenceStatus(), "compiled");
  ASSERT_TRUE(ev.task.test_result && ev.task.test_result->correctness_result);
  const ProcessResult& c = *ev.task.test_result->correctness_result;
  EXPECT_EQ(c.message.value_or(""), "Process killed due to inactivity");
  EXPECT_LT(c.returncode, 0);
  EXPECT_NE(c.stdout_text.find("task.py::TestSlowOrHang::test_behaviour"), std::string::npos);
  EXPECT_FALSE(ev.task.test_result->performance_result.has_value());  // not run after a failure
  EXPECT_LT(wall, 60.0);  // generous bound: 8 s of inactivity + startup
  ExpectNothingLeft();
}

// Golden hang_timeout lost the output ("stdout": ""); ours keeps what pytest printed before the kill.
TEST_F(SlowOrHang, HangEndsAtWallTimeoutWithOutputKept) {
  SetConfig("test_timeout: 8\ntest_output_inactivity_timeout: null\n");
  Evaluation ev = Run("hang");
  EXPECT_EQ(ev.result.status, EvalStatus::kTestTimeout);
  EXPECT_EQ(ev.result.perf_score, 2);
  const ProcessResult& c = *ev.task.test_result->correctness_result;
  EXPECT_EQ(c.message.value_or(""), "Process timed out after 8 seconds");
  EXPECT_NE(c.stdout_text.find("test session starts"), std::string::npos);
  EXPECT_NE(c.stdout_text.find("task.py::TestSlowOrHang::test_behaviour"), std::string::npos);
  EXPECT_NE(ev.result.eval_log.find("Process timed out after 8 seconds"), std::string::npos);
  ExpectNothingLeft();
}

// Golden noisy: escapes stripped, invalid UTF-8 replaced, OSC-8 links rendered, correct (perf 5).
TEST_F(SlowOrHang, NoisyOutputPasses) {
  Evaluation ev = Run("noisy");
  EXPECT_EQ(ev.result.perf_score, 5);
  EXPECT_EQ(ev.result.status, EvalStatus::kNoReference);  // test_reference: false
  EXPECT_EQ(ev.result.runtime_improvement, -1);
  const ProcessResult& c = *ev.task.test_result->correctness_result;
  EXPECT_EQ(c.returncode, 0);
  EXPECT_EQ(c.stdout_text.find('\x1b'), std::string::npos);
  EXPECT_NE(c.stdout_text.find("red bold green invalid utf-8: \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD | link "
                               "(https://example.invalid/doc)"),
            std::string::npos);
  EXPECT_EQ(c.stderr_text, "stderr warning \xEF\xBF\xBD(\n");
  ASSERT_TRUE(ev.task.test_result->performance_result);
  EXPECT_TRUE(ev.task.test_result->performance_result->output_data->contains("runtimes"));
  ExpectNothingLeft();
}

// Golden longline crashed the reference's monitor (asyncio 64 KiB line limit): perf 2. Ours passes.
TEST_F(SlowOrHang, LongLinePasses) {
  Evaluation ev = Run("longline");
  EXPECT_EQ(ev.result.perf_score, 5);
  const ProcessResult& c = *ev.task.test_result->correctness_result;
  EXPECT_EQ(c.returncode, 0);
  EXPECT_NE(c.stdout_text.find(std::string(200'000, 'L')), std::string::npos);
  ExpectNothingLeft();
}

// The reference waited a fixed 10 s after every pytest summary. Ours returns when pytest exits: with a
// 60 s end-marker grace the runs still end on their own (kExited) and well before the grace.
TEST_F(SlowOrHang, OkPassesWithoutWaitingForTheGrace) {
  Task task = testing::LoadTestTask(dir_).WithBlocks(BlockUpdateShort{{"EVOLVE", "MODE = \"ok\"\n"}});
  TempDir work;
  std::filesystem::path task_dir = work.path() / "task_data";
  task.task_data.ToDisk(task_dir);
  TestRequest req;
  req.variant = TestVariant{"custom", false, std::nullopt};
  req.work_dir = work.path();
  req.task_dir = task_dir;
  req.gpu_arch = "cpu";
  req.limits = HarnessLimits::FromConfig(task.config);
  req.limits.end_marker_grace = std::chrono::milliseconds{60'000};
  std::unique_ptr<Harness> harness = MakeHarness(task);
  req.expected_tests = task.correctness_tests;
  PhaseRun c = harness->Correctness(req);
  req.expected_tests = task.profile_tests;
  PhaseRun p = harness->Performance(req);
  EXPECT_EQ(c.verdict.status, EvalStatus::kCorrect) << c.verdict.detail;
  EXPECT_EQ(p.verdict.status, EvalStatus::kCorrect) << p.verdict.detail;
  EXPECT_EQ(c.reason, TerminationReason::kExited);
  EXPECT_EQ(p.reason, TerminationReason::kExited);
  EXPECT_LT(c.wall_s, 60.0);
  EXPECT_LT(p.wall_s, 60.0);
  EXPECT_FALSE(c.result.message.has_value());  // golden: message null
  const Json& runtimes = (*p.result.output_data)["runtimes"];
  ASSERT_TRUE(runtimes.contains("task.py::TestSlowOrHang::test_benchmark"));
  EXPECT_FALSE(runtimes["task.py::TestSlowOrHang::test_benchmark"].empty());
  // The runtimes come through the result pipe: nothing is written into the work dir or the task tree.
  EXPECT_FALSE(std::filesystem::exists(work.path() / "runtimes_custom.json"));
  EXPECT_TRUE(testing::ProcessesUnder(work.path()).empty());
}

}  // namespace
}  // namespace kf
