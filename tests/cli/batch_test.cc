// kf run's batch mode (--candidates, src/cli/batch.hpp), run as a real process on the native omp_reduction
// example: three candidates (correct, wrong values, not compiling) two at a time; every one gets its verdict
// and its own stored job, the summary lists the correct one first, copies of a candidate run once (verdict
// cache), and a bad --candidates path runs nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::BinaryDir;
using testing::ReadFile;
using testing::SourceDir;
using testing::TempDir;
using testing::WriteFile;

struct Ran {
  int rc;
  std::string out, err;
};

Ran Kf(const fs::path& tmp, const std::string& args) {
  const fs::path out = tmp / "out", err = tmp / "err";
  auto [rc, ignored] = testing::RunShell("{ KF_CACHE_DIR=" + testing::ShellQuote((tmp / "cache").string()) + " " +
                                         testing::ShellQuote((BinaryDir() / "kf").string()) + " " + args + " >" +
                                         testing::ShellQuote(out.string()) + " 2>" + testing::ShellQuote(err.string()) + "; }");
  return {rc, ReadFile(out), ReadFile(err)};
}

TEST(BatchRunE2E, EveryCandidateGetsItsVerdictAndJobSortedBySpeedup) {
  TempDir tmp;
  const fs::path examples = SourceDir() / "examples";
  const fs::path cands = tmp.path() / "candidates";
  fs::create_directories(cands);
  fs::copy_file(examples / "candidates" / "omp_reduction" / "fast.cpp", cands / "a_fast.cpp");
  fs::copy_file(examples / "candidates" / "omp_reduction" / "wrong.cpp", cands / "b_wrong.cpp");
  WriteFile(cands / "c_broken.cpp", "double kf_sum_squares(const float* x, std::size_t n) { return x[0] + ; }\n");
  const fs::path db = tmp.path() / "batch.sqlite3";
  Ran r = Kf(tmp.path(), "run " + testing::ShellQuote((examples / "tasks" / "omp_reduction").string()) + " --candidates " +
                             testing::ShellQuote(cands.string()) + " -j 2 --db " + testing::ShellQuote(db.string()) + " --json -");
  ASSERT_EQ(r.rc, 0) << r.err;  // every candidate got a verdict (two of them negative)
  Json doc = ParseJson(r.out, "stdout");
  ASSERT_TRUE(doc.is_array() && doc.size() == 3) << r.out;
  std::set<int64_t> jobs;
  for (const Json& e : doc) {
    EXPECT_TRUE(e["evaluated"].get<bool>()) << e.dump();
    jobs.insert(e["job_id"].get<int64_t>());
  }
  EXPECT_EQ(jobs.size(), 3u);  // one stored job each
  EXPECT_EQ(doc[0]["candidate"], (cands / "a_fast.cpp").string());  // JSON keeps the input order
  EXPECT_TRUE(doc[0]["correct"].get<bool>()) << doc[0].dump();
  EXPECT_GT(doc[0]["speedup"].get<double>(), 0);
  EXPECT_EQ(doc[1]["status"], "value_mismatch") << doc[1].dump();
  EXPECT_EQ(doc[2]["status"], "build_error") << doc[2].dump();
  // The human summary (stderr with --json -): progress lines, then the table, the correct candidate first.
  EXPECT_NE(r.err.find("kf run: done 3/3, running 0, queued 0, failed 0"), std::string::npos) << r.err;
  const size_t table = r.err.find("speedup [95% CI]");
  ASSERT_NE(table, std::string::npos) << r.err;
  EXPECT_LT(r.err.find("a_fast.cpp", table), r.err.find("b_wrong.cpp", table)) << r.err;
  EXPECT_NE(r.err.find("3 of 3 candidates evaluated, stored in"), std::string::npos) << r.err;

  Ran results = Kf(tmp.path(), "results --db " + testing::ShellQuote(db.string()) + " --json");
  ASSERT_EQ(results.rc, 0) << results.err;
  EXPECT_EQ(ParseJson(results.out, "stdout").size(), 3u) << results.out;
}

// Copies of a candidate in one batch run once (the copies reuse the first one's verdict through the verdict
// cache); a second batch reuses every cacheable verdict; --no-cache evaluates everything again.
TEST(BatchRunE2E, CopiesOfACandidateRunOnceAndVerdictsAreReused) {
  TempDir tmp;
  const fs::path examples = SourceDir() / "examples";
  const fs::path cands = tmp.path() / "candidates";
  fs::create_directories(cands);
  for (const char* name : {"a_wrong.cpp", "b_wrong_copy.cpp"}) {
    fs::copy_file(examples / "candidates" / "omp_reduction" / "wrong.cpp", cands / name);
  }
  for (const char* name : {"c_broken.cpp", "d_broken_copy.cpp"}) {
    WriteFile(cands / name, "double kf_sum_squares(const float* x, std::size_t n) { return x[0] + ; }\n");
  }
  const fs::path db = tmp.path() / "batch.sqlite3";
  const std::string args = "run " + testing::ShellQuote((examples / "tasks" / "omp_reduction").string()) + " --candidates " +
                           testing::ShellQuote(cands.string()) + " -j 2 --db " + testing::ShellQuote(db.string()) + " --json -";
  auto cached_flags = [](const Json& doc) {
    std::vector<bool> v;
    for (const Json& e : doc) v.push_back(e["cached"].get<bool>());
    return v;
  };
  Ran first = Kf(tmp.path(), args);
  ASSERT_EQ(first.rc, 0) << first.err;
  Json doc = ParseJson(first.out, "stdout");
  ASSERT_EQ(doc.size(), 4u) << first.out;
  EXPECT_EQ(cached_flags(doc), (std::vector<bool>{false, true, false, true})) << first.out;
  for (size_t i : {0, 1}) EXPECT_EQ(doc[i]["status"], "value_mismatch") << doc[i].dump();
  for (size_t i : {2, 3}) EXPECT_EQ(doc[i]["status"], "build_error") << doc[i].dump();
  std::set<int64_t> jobs;
  for (const Json& e : doc) jobs.insert(e["job_id"].get<int64_t>());
  EXPECT_EQ(jobs.size(), 4u) << "every candidate is recorded, copies included";
  EXPECT_NE(first.err.find("(cached)"), std::string::npos) << first.err;

  Ran again = Kf(tmp.path(), args);
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(cached_flags(ParseJson(again.out, "stdout")), (std::vector<bool>(4, true))) << again.out;

  Ran fresh = Kf(tmp.path(), args + " --no-cache");
  ASSERT_EQ(fresh.rc, 0) << fresh.err;
  EXPECT_EQ(cached_flags(ParseJson(fresh.out, "stdout")), (std::vector<bool>(4, false))) << fresh.out;
}

// A noisy verdict (correct, its interval wider than the target) is not kept by the verdict cache, but its
// copies in the same batch reuse it instead of timing the same code again (regression, 2026-12-01: in
// bench/batch_bench most verdicts of bias_relu were noisy, so 40 copies were timed again and the batch gained
// little from them). The next batch measures it afresh.
TEST(BatchRunE2E, CopiesReuseANoisyVerdictWithinTheBatchOnly) {
  TempDir tmp;
  const fs::path examples = SourceDir() / "examples";
  const fs::path task = tmp.path() / "task";
  fs::copy(examples / "tasks" / "omp_reduction", task, fs::copy_options::recursive);
  // A target no measurement reaches within a one-second budget: the verdict is noisy.
  std::string config = ReadFile(task / "config.yaml");
  config += "\neval_config:\n  timing: {target_rel_half_width: 0.00001, budget_s: 1, processes: 1}\n";
  WriteFile(task / "config.yaml", config);
  const fs::path cands = tmp.path() / "candidates";
  fs::create_directories(cands);
  for (const char* name : {"a_fast.cpp", "b_fast_copy.cpp"}) {
    fs::copy_file(examples / "candidates" / "omp_reduction" / "fast.cpp", cands / name);
  }
  const fs::path db = tmp.path() / "batch.sqlite3";
  const std::string args = "run " + testing::ShellQuote(task.string()) + " --candidates " + testing::ShellQuote(cands.string()) +
                           " -j 2 --db " + testing::ShellQuote(db.string()) + " --json -";
  Ran first = Kf(tmp.path(), args);
  ASSERT_EQ(first.rc, 0) << first.err;
  Json doc = ParseJson(first.out, "stdout");
  ASSERT_EQ(doc.size(), 2u) << first.out;
  EXPECT_EQ(doc[0]["status"], "noisy") << doc[0].dump();
  EXPECT_EQ(doc[0]["cached"], false);
  EXPECT_EQ(doc[1]["status"], "noisy") << doc[1].dump();
  EXPECT_EQ(doc[1]["cached"], true) << "the copy reuses the first's verdict";
  EXPECT_EQ(doc[1]["speedup"], doc[0]["speedup"]);
  EXPECT_EQ(doc[1]["speedup_ci"], doc[0]["speedup_ci"]);
  EXPECT_NE(doc[1]["job_id"], doc[0]["job_id"]) << "the copy is recorded as a job of its own";
  // The stored copy points at the first's job.
  Ran results = Kf(tmp.path(), "results --db " + testing::ShellQuote(db.string()) + " --json --all-columns");
  ASSERT_EQ(results.rc, 0) << results.err;
  EXPECT_NE(results.out.find("cached: verdict of job " + std::to_string(doc[0]["job_id"].get<int64_t>()) + " from "),
            std::string::npos)
      << results.out;
  EXPECT_NE(results.out.find("(the same candidate earlier in this batch)"), std::string::npos) << results.out;

  Ran again = Kf(tmp.path(), args);  // not from the verdict cache: the first is measured again
  ASSERT_EQ(again.rc, 0) << again.err;
  Json doc2 = ParseJson(again.out, "stdout");
  ASSERT_EQ(doc2.size(), 2u) << again.out;
  EXPECT_EQ(doc2[0]["cached"], false) << doc2[0].dump();
  EXPECT_EQ(doc2[1]["cached"], true) << doc2[1].dump();
  EXPECT_NE(doc2[0]["job_id"], doc[0]["job_id"]);
}

TEST(BatchRun, AMissingCandidatePathRunsNothing) {
  TempDir tmp;
  const fs::path db = tmp.path() / "batch.sqlite3";
  Ran r = Kf(tmp.path(), "run " + testing::ShellQuote((SourceDir() / "examples" / "tasks" / "omp_reduction").string()) +
                             " --candidates " + testing::ShellQuote((tmp.path() / "nope").string()) + " --db " + testing::ShellQuote(db.string()));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--candidates"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no such candidate file or directory"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
}

}  // namespace
}  // namespace kf
