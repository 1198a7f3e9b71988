// `kf results`: the stored evaluations as a table or JSON, read from --db (a path or URL of any backend),
// $KF_DB or runs/kernels.sqlite3; our status beside the reference-compatible one; bad values as one line.
#include <gtest/gtest.h>

#include <sstream>

#include "kernelfoundry/store.hpp"
#include "store/store_backends.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Backend;
using testing::BinaryDir;
using testing::RunShell;

class ResultsCommandTest : public testing::BackendTest {
 protected:
  void SetUp() override {
    kf_ = BinaryDir() / "kf";
    if (!std::filesystem::exists(kf_)) GTEST_SKIP() << "kf is not built (ninja kf)";
    BackendTest::SetUp();
    if (IsSkipped()) return;
    int64_t job = store_->CreateJob("custom", Json::object());
    (void)store_->UpdateJob(job, {.status = JobStatus::kComplete});
    store_->InsertKernel({{"task_name", "relu_cpu"}, {"job_id", job}, {"status", "correct"}, {"score", 5},
                          {"runtime", 0.123456}, {"improve_over_native", 2.5}, {"gpu_arch", "cpu"},
                          {"eval_log", "kf status: correct\nlong log"}, {"kf_status", "correct"},
                          {"eval_worker_info", Json::parse(R"({"cpu": {"hostname": "h", "timing": {"benchmarks":
                              {"b": {"speedup": 2.5, "ci": [2.45, 2.56], "rel_half_width": 0.022}}}}})")}});
    store_->InsertKernel({{"task_name", "gelu"}, {"status", "error"}, {"score", 1}, {"runtime", -1.0},
                          {"improve_over_native", -1.0}, {"eval_log", "a log the reference wrote"}});
    store_->InsertKernel({{"task_name", "relu_cpu"}, {"job_id", job}, {"status", "compiled"}, {"score", 3},
                          {"eval_log", "kf status: value_mismatch (cpu: tests failed although the output shapes "
                                       "match)\nlog"},
                          {"kf_status", "value_mismatch"}});
  }
  std::string Kf(const std::string& args, const std::string& env = {}) {
    return env + " '" + kf_.string() + "' " + args;
  }
  std::string Db() const { return "'" + db_->url() + "'"; }
  std::filesystem::path kf_;
};

TEST_P(ResultsCommandTest, TableListsRowsWithJobStatus) {
  auto [rc, out] = RunShell(Kf("results --db " + Db()));
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
  // Our status beside the reference-compatible one; "-" for a row the reference wrote.
  auto tokens = [](const std::string& line) {
    std::vector<std::string> words;
    std::istringstream in(line);
    for (std::string t; in >> t;) words.push_back(t);
    return words;
  };
  // id, date, time, task_name, job_id, job_status, kf_status, ref_status, score, runtime_ms, speedup, interval,
  // gpu_arch. The interval is the stored paired timing's (stranger test, 2026-12-05: only --all-columns had it).
  EXPECT_EQ(tokens(lines[0])[6], "kf_status");
  EXPECT_EQ(tokens(lines[0])[7], "ref_status");
  ASSERT_EQ(tokens(lines[1]).size(), 13u) << lines[1];
  EXPECT_EQ(tokens(lines[1])[11], "2.45-2.56") << lines[1];
  EXPECT_EQ(tokens(lines[2])[11], "-") << lines[2];
  EXPECT_EQ(tokens(lines[1])[6], "correct");
  EXPECT_EQ(tokens(lines[1])[7], "correct");
  EXPECT_EQ(tokens(lines[3])[6], "value_mismatch");
  EXPECT_EQ(tokens(lines[3])[7], "compiled");
  EXPECT_EQ(tokens(lines[2])[6], "-");
  EXPECT_EQ(tokens(lines[2])[7], "error");
  EXPECT_NE(lines[2].find("gelu"), std::string::npos);
  std::istringstream cells(lines[2]);
  for (std::string cell; cells >> cell;) {
    EXPECT_TRUE(cell != "-1" && cell != "-1x") << "-1 (not measured) shows as '-': " << lines[2];
  }
  EXPECT_EQ(out.find("long log"), std::string::npos);
}

TEST_P(ResultsCommandTest, JsonWithFilters) {
  auto [rc, out] = RunShell(Kf("results --json --task relu_cpu --last 1", "KF_DB=" + Db()));
  ASSERT_EQ(rc, 0) << out;
  Json rows = ParseJson(out, "stdout");
  ASSERT_TRUE(rows.is_array());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["id"], 3);
  EXPECT_EQ(rows[0]["status"], "compiled");
  EXPECT_EQ(rows[0]["kf_status"], "value_mismatch");
  EXPECT_EQ(rows[0]["job_status"], "COMPLETE");
  EXPECT_TRUE(rows[0].contains("improve_over_native"));
  EXPECT_TRUE(rows[0].contains("eval_worker_info"));  // where the stored interval and timing conditions are
  EXPECT_FALSE(rows[0].contains("eval_log"));

  auto [rc2, all] = RunShell(Kf("results --json --all-columns --db " + Db()));
  ASSERT_EQ(rc2, 0) << all;
  Json full = ParseJson(all, "stdout");
  ASSERT_EQ(full.size(), 3u);
  EXPECT_EQ(full[0]["eval_log"], "kf status: correct\nlong log");
  EXPECT_EQ(full[0]["kf_status"], "correct");
  EXPECT_TRUE(full[1]["kf_status"].is_null());
}

// Reference bug: `--last -1` printed CLI11's range message with a huge number; now one kf error line.
TEST_P(ResultsCommandTest, NegativeLastIsOneErrorLine) {
  auto [rc, out] = RunShell(Kf("results --last -1 --db " + Db()));
  EXPECT_EQ(rc, 3) << out;
  EXPECT_EQ(out, "kf: error: --last: must be 0 (all) or a positive number, got -1\n");
}

INSTANTIATE_TEST_SUITE_P(Backends, ResultsCommandTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         testing::BackendParamName());

// The SQLite default: runs/kernels.sqlite3 under the current directory.
TEST(ResultsCommand, DefaultPathIsRunsUnderTheCurrentDirectory) {
  std::filesystem::path kf = BinaryDir() / "kf";
  if (!std::filesystem::exists(kf)) GTEST_SKIP() << "kf is not built (ninja kf)";
  testing::TempDir tmp;
  OpenStore((tmp.path() / "runs" / "kernels.sqlite3").string())->InsertKernel({{"task_name", "t"}});
  auto [rc, out] = RunShell("cd '" + tmp.path().string() + "' && env -u KF_DB '" + kf.string() + "' results --json");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(ParseJson(out, "stdout").size(), 1u);
}

TEST(ResultsCommand, MissingDatabaseIsNotFound) {
  std::filesystem::path kf = BinaryDir() / "kf";
  if (!std::filesystem::exists(kf)) GTEST_SKIP() << "kf is not built (ninja kf)";
  testing::TempDir tmp;
  auto missing = tmp.path() / "nowhere" / "k.sqlite3";
  auto [rc, out] = RunShell("'" + kf.string() + "' results --db '" + missing.string() + "'");
  EXPECT_EQ(rc, 4) << out;
  EXPECT_NE(out.find(missing.string()), std::string::npos) << out;
  EXPECT_NE(out.find("no results database"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(missing.parent_path()));
}

// Reference bug (issue 11): `--db postgresql://…` silently created a SQLite file under a directory named
// "postgresql:". An unknown scheme is now an error naming the value, and nothing is created.
TEST(ResultsCommand, UnknownSchemeIsAnErrorAndCreatesNothing) {
  std::filesystem::path kf = BinaryDir() / "kf";
  if (!std::filesystem::exists(kf)) GTEST_SKIP() << "kf is not built (ninja kf)";
  testing::TempDir tmp;
  auto [rc, out] = RunShell("cd '" + tmp.path().string() + "' && '" + kf.string() +
                            "' results --db 'mysql://root:hunter2@127.0.0.1/kf'");
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("unknown scheme 'mysql'"), std::string::npos) << out;
  EXPECT_NE(out.find("mysql://root:***@127.0.0.1/kf"), std::string::npos) << out;
  EXPECT_EQ(out.find("hunter2"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

}  // namespace
}  // namespace kf
