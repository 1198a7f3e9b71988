// `kf results`: the stored evaluations as a table or JSON, read from --db, $KF_DB or runs/kernels.sqlite3.
#include <gtest/gtest.h>

#include <sstream>

#include "kernelfoundry/store.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::BinaryDir;
using testing::RunShell;
using testing::TempDir;

class ResultsCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kf_ = BinaryDir() / "kf";
    if (!std::filesystem::exists(kf_)) GTEST_SKIP() << "kf is not built (ninja kf)";
    auto store = SqliteStore::Open(db_);
    int64_t job = store->CreateJob("custom", Json::object());
    (void)store->UpdateJob(job, {.status = JobStatus::kComplete});
    store->InsertKernel({{"task_name", "relu_cpu"}, {"job_id", job}, {"status", "correct"}, {"score", 5},
                         {"runtime", 0.123456}, {"improve_over_native", 2.5}, {"gpu_arch", "cpu"},
                         {"eval_log", "long log"}});
    store->InsertKernel({{"task_name", "gelu"}, {"status", "error"}, {"score", 1}, {"runtime", -1.0},
                         {"improve_over_native", -1.0}});
    store->InsertKernel({{"task_name", "relu_cpu"}, {"job_id", job}, {"status", "compiled"}, {"score", 3}});
  }
  std::string Kf(const std::string& args, const std::string& env = {}) {
    return env + " '" + kf_.string() + "' " + args;
  }
  TempDir tmp_;
  std::filesystem::path db_ = tmp_.path() / "runs" / "kernels.sqlite3";
  std::filesystem::path kf_;
};

TEST_F(ResultsCommandTest, TableListsRowsWithJobStatus) {
  auto [rc, out] = RunShell(Kf("results --db '" + db_.string() + "'"));
  ASSERT_EQ(rc, 0) << out;
  std::vector<std::string> lines;
  for (size_t pos = 0, nl; (nl = out.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    lines.push_back(out.substr(pos, nl - pos));
  }
  ASSERT_EQ(lines.size(), 4u) << out;
  EXPECT_EQ(lines[0].rfind("id  timestamp (UTC)", 0), 0u) << lines[0];
  for (const char* col : {"task_name", "job_id", "job_status", "status", "score", "runtime_ms", "speedup", "gpu_arch"}) {
    EXPECT_NE(lines[0].find(col), std::string::npos) << col;
  }
  EXPECT_NE(lines[1].find("relu_cpu"), std::string::npos);
  EXPECT_NE(lines[1].find("COMPLETE"), std::string::npos);
  EXPECT_NE(lines[1].find("0.1235"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("2.5x"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("gelu"), std::string::npos);
  std::istringstream cells(lines[2]);
  for (std::string cell; cells >> cell;) {
    EXPECT_TRUE(cell != "-1" && cell != "-1x") << "-1 (not measured) shows as '-': " << lines[2];
  }
  EXPECT_EQ(out.find("long log"), std::string::npos);
}

TEST_F(ResultsCommandTest, JsonWithFilters) {
  auto [rc, out] = RunShell(Kf("results --json --task relu_cpu --last 1", "KF_DB='" + db_.string() + "'"));
  ASSERT_EQ(rc, 0) << out;
  Json rows = ParseJson(out, "stdout");
  ASSERT_TRUE(rows.is_array());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["id"], 3);
  EXPECT_EQ(rows[0]["status"], "compiled");
  EXPECT_EQ(rows[0]["job_status"], "COMPLETE");
  EXPECT_TRUE(rows[0].contains("improve_over_native"));
  EXPECT_FALSE(rows[0].contains("eval_log"));

  auto [rc2, all] = RunShell(Kf("results --json --all-columns --db '" + db_.string() + "'"));
  ASSERT_EQ(rc2, 0) << all;
  Json full = ParseJson(all, "stdout");
  ASSERT_EQ(full.size(), 3u);
  EXPECT_EQ(full[0]["eval_log"], "long log");
}

TEST_F(ResultsCommandTest, DefaultPathIsRunsUnderTheCurrentDirectory) {
  auto [rc, out] = RunShell("cd '" + tmp_.path().string() + "' && " + Kf("results --json", "env -u KF_DB"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(ParseJson(out, "stdout").size(), 3u);
}

TEST_F(ResultsCommandTest, MissingDatabaseIsNotFound) {
  auto missing = tmp_.path() / "nowhere" / "k.sqlite3";
  auto [rc, out] = RunShell(Kf("results --db '" + missing.string() + "'"));
  EXPECT_EQ(rc, 4) << out;
  EXPECT_NE(out.find(missing.string()), std::string::npos) << out;
  EXPECT_NE(out.find("no results database"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(missing.parent_path()));
}

}  // namespace
}  // namespace kf
