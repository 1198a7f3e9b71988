// The verdict cache of farm workers' test bodies (kernelfoundry/verdict_cache.hpp): which test stages are
// stored (the same rule as evaluations: noisy / suspicious timing, timeouts, limits, crashes and a failing
// reference never are), what the key depends on (candidate, arch, variants, build artifacts — not the build
// logs), and TestThroughVerdictCache running a body once and then returning its stored value.
#include <gtest/gtest.h>

#include <string>

#include "kernelfoundry/verdict_cache.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

// A stage on arch "cpu" with one candidate variant ("custom") and, unless `reference` is nullopt, the reference.
TestStageResult Stage(EvalStatus correctness, std::optional<EvalStatus> performance,
                      std::optional<EvalStatus> reference = EvalStatus::kCorrect) {
  TestStageResult s;
  std::vector<std::pair<std::string, VariantRun>> runs;
  VariantRun custom;
  custom.correctness = Classification{correctness, ""};
  if (performance) custom.performance = Classification{*performance, ""};
  runs.emplace_back("custom", custom);
  if (reference) {
    VariantRun ref;
    ref.correctness = Classification{*reference, ""};
    runs.emplace_back("reference", ref);
  }
  s.per_arch.emplace_back("cpu", std::move(runs));
  return s;
}

TEST(TestStageCache, OnlyStagesWhoseEveryVerdictIsACandidatePropertyAreStored) {
  EXPECT_TRUE(IsCacheableTestStage(Stage(EvalStatus::kCorrect, EvalStatus::kCorrect)));
  EXPECT_TRUE(IsCacheableTestStage(Stage(EvalStatus::kValueMismatch, std::nullopt)));
  EXPECT_TRUE(IsCacheableTestStage(Stage(EvalStatus::kCorrect, std::nullopt, std::nullopt)));  // candidate only
  // Timing that must be measured again.
  EXPECT_FALSE(IsCacheableTestStage(Stage(EvalStatus::kCorrect, EvalStatus::kNoisy)));
  EXPECT_FALSE(IsCacheableTestStage(Stage(EvalStatus::kCorrect, EvalStatus::kSuspicious)));
  // Environment failures of the candidate's runs.
  for (EvalStatus s : {EvalStatus::kTestTimeout, EvalStatus::kResourceLimit, EvalStatus::kCrash,
                       EvalStatus::kTestError, EvalStatus::kInfrastructureError, EvalStatus::kCanceled}) {
    EXPECT_FALSE(IsCacheableTestStage(Stage(s, std::nullopt))) << EvalStatusName(s);
    EXPECT_FALSE(IsCacheableTestStage(Stage(EvalStatus::kCorrect, s))) << EvalStatusName(s);
  }
  // A reference that did not pass (its verdict would be reference_failed), or whose timing is noisy.
  EXPECT_FALSE(IsCacheableTestStage(Stage(EvalStatus::kCorrect, std::nullopt, EvalStatus::kValueMismatch)));
  EXPECT_FALSE(IsCacheableTestStage(Stage(EvalStatus::kCorrect, std::nullopt, EvalStatus::kTestTimeout)));
  TestStageResult noisy_reference = Stage(EvalStatus::kCorrect, EvalStatus::kCorrect);
  noisy_reference.per_arch[0].second[1].second.performance = Classification{EvalStatus::kNoisy, ""};
  EXPECT_FALSE(IsCacheableTestStage(noisy_reference));
  // Nothing of the candidate ran (a reference-only body, a variant without a verdict, an empty stage).
  TestStageResult reference_only = Stage(EvalStatus::kCorrect, std::nullopt);
  reference_only.per_arch[0].second.erase(reference_only.per_arch[0].second.begin());
  EXPECT_FALSE(IsCacheableTestStage(reference_only));
  TestStageResult not_run = Stage(EvalStatus::kCorrect, std::nullopt);
  not_run.per_arch[0].second[0].second.correctness.reset();
  EXPECT_FALSE(IsCacheableTestStage(not_run));
  EXPECT_FALSE(IsCacheableTestStage(TestStageResult{}));
}

// A task with a candidate block and a build result whose artifacts hold `binary`.
Task BuiltTask(const std::string& code, const std::string& binary, const std::string& log) {
  Task t;
  t.config = Json{{"task_name", "stage_cache"}, {"gpu_arch", "cpu"}, {"test_custom", true}, {"test_reference", true}};
  t.task_data.Set("kernel.cpp", code, FileMeta{0644, 1.0});
  BuildResult b;
  b.result = ProcessResult::Create(0, log, "", "");
  b.worker_info = Json{{"hostname", "builder"}, {"time", log}};
  b.artifacts.emplace();
  b.artifacts->Set("build/test_kernel", binary, FileMeta{0755, 2.0});
  t.build_result = b;
  return t;
}

TEST(TestStageCache, TheKeyFollowsCandidateArchVariantsAndArtifactsButNotBuildLogs) {
  const Task base = BuiltTask("int f() { return 1; }", "\x7f" "ELF one", "built in 3.1 s");
  const std::string key = TestStageCacheKey(base, {"cpu"}, true, true);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(TestStageCacheKey(BuiltTask("int f() { return 1; }", "\x7f" "ELF one", "built in 9.9 s"), {"cpu"}, true, true),
            key);  // another build of the same artifacts: its log and worker_info do not matter
  Task rebuilt = base;  // the same binary written again later (a build cache hit)
  rebuilt.build_result->artifacts->SetMeta("build/test_kernel", FileMeta{0755, 99.0});
  EXPECT_EQ(TestStageCacheKey(rebuilt, {"cpu"}, true, true), key);
  EXPECT_NE(TestStageCacheKey(BuiltTask("int f() { return 2; }", "\x7f" "ELF one", "built in 3.1 s"), {"cpu"}, true, true),
            key);
  EXPECT_NE(TestStageCacheKey(BuiltTask("int f() { return 1; }", "\x7f" "ELF two", "built in 3.1 s"), {"cpu"}, true, true),
            key);
  EXPECT_NE(TestStageCacheKey(base, {"lnl"}, true, true), key);
  EXPECT_NE(TestStageCacheKey(base, {"cpu"}, true, false), key);
  Task failed = base;
  failed.build_result->result->returncode = 1;
  EXPECT_NE(TestStageCacheKey(failed, {"cpu"}, true, true), key);
}

TEST(TestStageCache, ABodyRunsOnceAndThenComesFromTheCacheUnlessItMayNotBeStored) {
  TempDir dir;
  ScopedEnv cache("KF_CACHE_DIR", dir.path().c_str());
  int runs = 0;
  auto body = [&](EvalStatus status) {
    return [&runs, status]() -> std::pair<Json, TestStageResult> {
      ++runs;
      return {Json{{"custom", Json{{"run", runs}}}}, Stage(status, std::nullopt)};
    };
  };
  const std::string key = TestStageCacheKey(BuiltTask("a", "b", "c"), {"cpu"}, true, true);
  TestBodyValue first = TestThroughVerdictCache(key, body(EvalStatus::kValueMismatch));
  EXPECT_TRUE(first.cached.is_null());
  TestBodyValue second = TestThroughVerdictCache(key, body(EvalStatus::kValueMismatch));
  EXPECT_EQ(runs, 1);  // not run again
  EXPECT_EQ(second.value, first.value);
  EXPECT_EQ(second.cached["key"], key);
  EXPECT_TRUE(second.cached["created_at"].is_string());
  // An evaluation's lookup never takes a stage entry (nor the other way round).
  EXPECT_FALSE(LookupVerdict(dir.path(), key, BuiltTask("a", "b", "c"), std::nullopt).has_value());

  const std::string timeout_key = TestStageCacheKey(BuiltTask("hang", "b", "c"), {"cpu"}, true, true);
  TestThroughVerdictCache(timeout_key, body(EvalStatus::kTestTimeout));
  TestBodyValue again = TestThroughVerdictCache(timeout_key, body(EvalStatus::kTestTimeout));
  EXPECT_EQ(runs, 3);  // a timeout is measured again every time
  EXPECT_TRUE(again.cached.is_null());
  EXPECT_FALSE(LookupTestStage(dir.path(), timeout_key).has_value());
}

}  // namespace
}  // namespace kf
