// The verdict cache (kernelfoundry/verdict_cache.hpp): which statuses are stored, the EvalResult round trip,
// malformed entries, and `kf run` end to end on a small pure-Python task: the second identical run reuses the
// first run's verdict (no build, no test: "cached": true, the first job named, a new job recorded),
// --no-verdict-cache runs again, a changed candidate or another isolation of the children misses; the worker
// fingerprint holds the children's environment (isolation mode, SDK / Python package, a missing one's error).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "kernelfoundry/record.hpp"
#include "kernelfoundry/resources.hpp"
#include "kernelfoundry/store.hpp"
#include "kernelfoundry/verdict_cache.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::RunShell;
using testing::ScopedEnv;
using testing::TempDir;
using testing::WriteFile;

TEST(VerdictCache, OnlyCandidatePropertiesAreCacheable) {
  for (EvalStatus s : {EvalStatus::kCorrect, EvalStatus::kValueMismatch, EvalStatus::kBuildError,
                       EvalStatus::kTestsFailed, EvalStatus::kExtractionFailed, EvalStatus::kShapeMismatch}) {
    EXPECT_TRUE(IsCacheableStatus(s)) << EvalStatusName(s);
  }
  // Environment failures and timing that must be measured again.
  for (EvalStatus s : {EvalStatus::kNoisy, EvalStatus::kSuspicious, EvalStatus::kTestTimeout,
                       EvalStatus::kBuildTimeout, EvalStatus::kResourceLimit, EvalStatus::kCrash,
                       EvalStatus::kInfrastructureError, EvalStatus::kCanceled, EvalStatus::kTestError,
                       EvalStatus::kReferenceOnly, EvalStatus::kReferenceFailed, EvalStatus::kEvaluationError}) {
    EXPECT_FALSE(IsCacheableStatus(s)) << EvalStatusName(s);
  }
}

TEST(VerdictCache, EvalResultRoundTripsThroughJson) {
  EvalResult r;
  r.compiled = true;
  r.correctness = true;
  r.metadata = Json{{"eval_worker_info", Json{{"hostname", "h"}}}};
  r.runtime = 1.25;
  r.runtime_stats = Json{{"t::bench", Json{{"mean", 1.25}}}};
  r.runtime_improvement = 1.5;
  r.improve_over_compile = -1;
  r.perf_score = 5;
  r.eval_log = "log\n";
  r.status = EvalStatus::kCorrect;
  r.status_detail = "detail";
  r.benchmarks.push_back({"", "t::bench", 1.875, 1.25, 1.5, 30, true, 1.4, 1.6});
  r.benchmarks.push_back({"cpu", "t::other", 2, -1, -1, 0, false, -1, -1});
  r.timing = Json{{"records", Json::array({1, 2})}};
  const EvalResult back = EvalResultFromJson(r.ToJson());
  EXPECT_EQ(back.ToJson(), r.ToJson());
  EXPECT_EQ(back.benchmarks.at(0).speedup_ci_low, 1.4);
  EXPECT_EQ(back.benchmarks.at(1).speedup_ci_high, -1);
  EXPECT_EQ(back.status, EvalStatus::kCorrect);
  Json bad = r.ToJson();
  bad["status"] = "no_such_status";
  testing::ExpectError(ErrorKind::kParse, [&] { (void)EvalResultFromJson(bad); });
  bad.erase("perf_score");
  testing::ExpectError(ErrorKind::kParse, [&] { (void)EvalResultFromJson(bad); });
}

TEST(VerdictCache, StoresOnlyCacheableVerdictsAndTreatsMalformedEntriesAsMisses) {
  TempDir tmp;
  Task task;
  Evaluation ev;
  ev.archs = {"cpu"};
  ev.result.status = EvalStatus::kNoisy;
  EXPECT_FALSE(StoreVerdict(tmp.path(), "k1", ev, 7));
  EXPECT_FALSE(LookupVerdict(tmp.path(), "k1", task, std::nullopt));
  ev.result.status = EvalStatus::kValueMismatch;
  ev.result.perf_score = 4;
  ev.combined_score = 0.5;
  ASSERT_TRUE(StoreVerdict(tmp.path(), "k1", ev, 7));
  std::optional<Evaluation> hit = LookupVerdict(tmp.path(), "k1", task, std::nullopt);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->result.status, EvalStatus::kValueMismatch);
  EXPECT_EQ(hit->combined_score, 0.5);
  EXPECT_EQ(hit->archs, std::vector<std::string>{"cpu"});
  EXPECT_EQ(hit->cached["job_id"], 7);
  EXPECT_EQ(hit->cached["key"], "k1");
  EXPECT_EQ(CachedNote(*hit).rfind("cached: verdict of job 7 from 20", 0), 0u) << CachedNote(*hit);
  EXPECT_FALSE(StoreVerdict(tmp.path(), "k2", *hit, 8)) << "a reused verdict is not stored again";
  // Only the entry itself in the directory (no temp files left).
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path() / "verdicts")) {
    EXPECT_EQ(e.path().filename(), "k1.json");
    ++files;
  }
  EXPECT_EQ(files, 1u);
  WriteFile(tmp.path() / "verdicts" / "k1.json", "{\"version\": 1, \"key\": \"k1\", \"result\": ");
  EXPECT_FALSE(LookupVerdict(tmp.path(), "k1", task, std::nullopt));
  WriteFile(tmp.path() / "verdicts" / "k3.json", testing::ReadFile(tmp.path() / "verdicts" / "k1.json"));
  EXPECT_FALSE(LookupVerdict(tmp.path(), "k3", task, std::nullopt)) << "an entry must name its own key";
}

// Regression (integration of the verdict cache with the resource lookup and issue-10 isolation): a native run
// whose SDK is missing (KF_SDK_DIR at an empty directory; the install test hides the installed SDK) was served
// the verdict of the earlier run that had it (exit 0 instead of "cannot find the task SDK"), and a run with
// KF_ISOLATION=off was served the isolated run's verdict. The children's environment is part of the key.
TEST(VerdictCache, FingerprintHoldsTheChildrensEnvironment) {
  TempDir tmp;
  std::filesystem::create_directories(tmp.path() / "empty");
  ScopedEnv no_sdk_dir("KF_SDK_DIR", nullptr);
  ScopedEnv no_isolation_setting("KF_ISOLATION", nullptr);
  const Json native = WorkerFingerprint("native");
  ASSERT_TRUE(native["environment"].contains("sdk")) << native["environment"].dump();
  EXPECT_FALSE(native["environment"].contains("python_package")) << "a native evaluation runs no Python";
  EXPECT_EQ(WorkerFingerprint("native"), native) << "stable between calls";
  const Json pytest = WorkerFingerprint("pytest");
  ASSERT_TRUE(pytest["environment"].contains("python_package")) << pytest["environment"].dump();
  EXPECT_EQ(pytest["environment"]["python"], TaskPythonInterpreter());
  {
    ScopedEnv sdk("KF_SDK_DIR", (tmp.path() / "empty").c_str());
    const Json missing = WorkerFingerprint("native");
    EXPECT_NE(missing, native);
    EXPECT_FALSE(missing["environment"].contains("sdk"));
    EXPECT_NE(missing["environment"].value("resource_error", "").find("KF_SDK_DIR"), std::string::npos)
        << missing["environment"].dump();
  }
  {
    // Regression (2026-12-01, a new user's check): KF_TIMING_PROCESSES=5 was served the verdict of a run with
    // kf's default of 3 timed processes.
    ScopedEnv processes("KF_TIMING_PROCESSES", "5");
    const Json five = WorkerFingerprint("native");
    EXPECT_EQ(five["environment"]["timing"]["KF_TIMING_PROCESSES"], "5") << five["environment"].dump();
    EXPECT_NE(five, native);
    // A budget no test environment sets (scripts/test.sh exports one: the key must follow the value, not its
    // presence).
    ScopedEnv budget("KF_TIMING_BUDGET_S", "2.75");
    EXPECT_NE(WorkerFingerprint("native"), five);
  }
  {
    ScopedEnv off("KF_ISOLATION", "off");
    EXPECT_EQ(WorkerFingerprint("native")["environment"]["isolation"], "off (KF_ISOLATION=off)");
    EXPECT_NE(WorkerFingerprint("native"), native);
  }
  {
    ScopedEnv bogus("KF_ISOLATION", "bogus");
    EXPECT_EQ(WorkerFingerprint("native")["environment"]["isolation"].get<std::string>().rfind("error: ", 0), 0u)
        << "an unusable setting is keyed by its error (the fresh run reports it)";
  }
  // A changed SDK file (same path) changes the fingerprint: copy the SDK, then touch one of its sources.
  const TaskSdk sdk = FindTaskSdk();
  const std::filesystem::path copy = tmp.path() / "sdk";
  std::filesystem::create_directories(copy);
  std::filesystem::copy(sdk.include_dir, copy / "include", std::filesystem::copy_options::recursive);
  for (const auto& source : sdk.sources) {
    const std::filesystem::path rel = std::filesystem::relative(source, sdk.include_dir.parent_path() / "src");
    std::filesystem::create_directories((copy / "src" / rel).parent_path());
    std::filesystem::copy_file(source, copy / "src" / rel);
  }
  ScopedEnv sdk_copy("KF_SDK_DIR", copy.c_str());
  const Json before = WorkerFingerprint("native");
  ASSERT_TRUE(before["environment"].contains("sdk")) << before["environment"].dump();
  const std::filesystem::path first = FindTaskSdk().sources.at(0);
  WriteFile(first, testing::ReadFile(first) + "\n// edited\n");
  EXPECT_NE(WorkerFingerprint("native"), before) << "an edited SDK source must not reuse verdicts";
}

TEST(VerdictCacheCli, IdenticalRunReusesTheVerdictAndRecordsAJob) {
  const std::filesystem::path kf = testing::BinaryDir() / "kf";
  if (!std::filesystem::exists(kf)) GTEST_SKIP() << "kf is not built (ninja kf)";
  TempDir tmp;
  const std::filesystem::path dir = tmp.path() / "py_scale_vc";
  testing::WritePyScaleTask(
      dir, "task_name: py_scale_vc\njob_name: vc\ntask_origin: custom\nlanguage: python\ngpu_arch: cpu\n"
           "has_build_step: false\nhas_reference_build_step: false\ntest_timeout: 120\n"
           "eval_config:\n  warmup_min_time: 0.02\n  perf_trials_min_time: 0.1\n");
  WriteFile(tmp.path() / "wrong.py", "def scale(xs):\n    return [3 * x for x in xs]\n");
  WriteFile(tmp.path() / "wrong2.py", "def scale(xs):\n    return [4 * x for x in xs]\n");
  const std::string db = (tmp.path() / "k.sqlite3").string();
  // A private cache directory: the first run is fresh whatever other runs stored.
  auto kf_run = [&](const std::string& candidate, const std::string& json, const std::string& extra) {
    return RunShell("KF_CACHE_DIR='" + (tmp.path() / "cache").string() + "' '" + kf.string() + "' run '" +
                    dir.string() + "' --candidate '" + (tmp.path() / candidate).string() + "' --db '" + db +
                    "' --json '" + (tmp.path() / json).string() + "' " + extra);
  };
  auto [rc1, out1] = kf_run("wrong.py", "1.json", "");
  EXPECT_EQ(rc1, 1) << out1;
  Json doc1 = ParseJson(testing::ReadFile(tmp.path() / "1.json"), "1.json");
  EXPECT_EQ(doc1["status"], "value_mismatch") << out1;
  EXPECT_EQ(doc1["cached"], false);
  EXPECT_EQ(doc1["job_id"], 1);

  auto [rc2, out2] = kf_run("wrong.py", "2.json", "");
  EXPECT_EQ(rc2, 1) << out2;
  Json doc2 = ParseJson(testing::ReadFile(tmp.path() / "2.json"), "2.json");
  EXPECT_EQ(doc2["cached"], true) << out2;
  EXPECT_EQ(doc2["cached_from"]["job_id"], 1);
  EXPECT_EQ(doc2["status"], "value_mismatch");
  EXPECT_EQ(doc2["result"], doc1["result"]);
  EXPECT_EQ(doc2["job_id"], 2);
  EXPECT_EQ(doc2["timings"]["phases"], Json::array()) << "nothing may be built or tested";
  EXPECT_NE(out2.find("cached: verdict of job 1 from "), std::string::npos) << out2;
  EXPECT_EQ(out2.find("correctness"), std::string::npos) << "no test phase may run: " << out2;

  // Another isolation of the children is another environment: a miss (the run notes the isolation).
  auto [rc2b, out2b] = RunShell("KF_ISOLATION=off KF_CACHE_DIR='" + (tmp.path() / "cache").string() + "' '" +
                                kf.string() + "' run '" + dir.string() + "' --candidate '" +
                                (tmp.path() / "wrong.py").string() + "' --no-store --json '" +
                                (tmp.path() / "2b.json").string() + "'");
  EXPECT_EQ(rc2b, 1) << out2b;
  Json doc2b = ParseJson(testing::ReadFile(tmp.path() / "2b.json"), "2b.json");
  EXPECT_EQ(doc2b["cached"], false) << out2b;
  EXPECT_NE(doc2b["status_detail"].get<std::string>().find("KF_ISOLATION=off"), std::string::npos)
      << doc2b["status_detail"];

  auto [rc3, out3] = kf_run("wrong.py", "3.json", "--no-verdict-cache");
  EXPECT_EQ(rc3, 1) << out3;
  Json doc3 = ParseJson(testing::ReadFile(tmp.path() / "3.json"), "3.json");
  EXPECT_EQ(doc3["cached"], false);
  EXPECT_NE(doc3["timings"]["phases"], Json::array());

  auto [rc4, out4] = kf_run("wrong2.py", "4.json", "");
  EXPECT_EQ(rc4, 1) << out4;
  Json doc4 = ParseJson(testing::ReadFile(tmp.path() / "4.json"), "4.json");
  EXPECT_EQ(doc4["cached"], false) << "a changed candidate is a miss";

  auto store = OpenStore(db, {.read_only = true});
  std::vector<Json> kernels = store->ListKernels({.columns = {"id", "kf_status", "eval_log", "job_id"}});
  ASSERT_EQ(kernels.size(), 4u);
  EXPECT_EQ(kernels[1]["kf_status"], "value_mismatch");
  EXPECT_NE(kernels[1]["eval_log"].get<std::string>().find("\ncached: verdict of job 1 from "), std::string::npos)
      << kernels[1]["eval_log"];
  EXPECT_EQ(kernels[0]["eval_log"].get<std::string>().find("cached:"), std::string::npos);
}

}  // namespace
}  // namespace kf
