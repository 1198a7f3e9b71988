// `kf run` and `kf validate --run` through the record module, end to end on a small pure-Python task, with
// the results in SQLite or PostgreSQL (--db URL): both verbs apply overrides.yml (regression: validate --run
// did not), both record their jobs, `kf results --db URL` reads them back with our status, and the password
// of a PostgreSQL URL appears in no output.
#include <gtest/gtest.h>

#include "kernelfoundry/store.hpp"
#include "pipeline/pipeline_util.hpp"
#include "store/store_backends.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Backend;
using testing::RunShell;
using testing::WriteFile;

/// Writes the py_scale package into `dir`, with an overrides.yml that changes gpu_arch and test_timeout.
void WritePyScale(const std::filesystem::path& dir) {
  testing::WritePyScaleTask(
      dir, "task_name: py_scale\njob_name: py_scale_test\ntask_origin: custom\nlanguage: python\n"
           "gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\ntest_reference: true\n"
           "test_timeout: 120\neval_config:\n  warmup_min_time: 0.02\n  perf_trials_min_time: 0.1\n");
  // What the run must use: the overrides, not config.yaml (spec §1.5: task config < overrides).
  WriteFile(dir / "overrides.yml", "gpu_arch: ovr_arch\ntest_timeout: 77\n");
}

class RunCliTest : public testing::BackendTest {
 protected:
  void SetUp() override {
    kf_ = testing::BinaryDir() / "kf";
    if (!std::filesystem::exists(kf_)) GTEST_SKIP() << "kf is not built (ninja kf)";
    BackendTest::SetUp();
    if (IsSkipped()) return;
    testing::UseTestCache();
    dir_ = db_->tmp().path() / "py_scale";
    WritePyScale(dir_);
  }
  std::pair<int, std::string> Kf(const std::string& args) {
    return RunShell("KF_CACHE_DIR='" + std::string(std::getenv("KF_CACHE_DIR")) + "' '" + kf_.string() + "' " + args);
  }
  std::filesystem::path kf_, dir_;
};

TEST_P(RunCliTest, RunAndValidateRunApplyOverridesAndRecordInTheStore) {
  const std::string db = "'" + db_->url() + "'";
  auto [vrc, vout] = Kf("validate '" + dir_.string() + "' --run --db " + db);
  ASSERT_EQ(vrc, 0) << vout;
  EXPECT_NE(vout.find("reference run: PASSED (reference_only)"), std::string::npos) << vout;
  EXPECT_NE(vout.find("  ovr_arch task.py::TestScale::test_benchmark: "), std::string::npos) << vout;  // the overridden arch

  WriteFile(db_->tmp().path() / "wrong.py", "def scale(xs):\n    return [3 * x for x in xs]\n");
  auto [rc, out] = Kf("run '" + dir_.string() + "' --candidate '" + (db_->tmp().path() / "wrong.py").string() +
                      "' --no-verdict-cache --db " + db + " --json '" + (db_->tmp().path() / "out.json").string() + "'");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("status: value_mismatch"), std::string::npos) << out;
  std::string shown = RedactStoreUrl(db_->url());
  EXPECT_NE(out.find("stored: job 2, kernel "), std::string::npos) << out;
  EXPECT_NE(out.find(" in " + shown + "\n"), std::string::npos) << out;
  Json doc = ParseJson(testing::ReadFile(db_->tmp().path() / "out.json"), "out.json");
  EXPECT_EQ(doc["db"], shown);
  EXPECT_EQ(doc["job_id"], 2);
  EXPECT_EQ(doc["gpu_arch"], Json::array({"ovr_arch"}));

  auto store = OpenStore(db_->url(), {.read_only = true});
  std::vector<Json> kernels = store->ListKernels({.columns = {"id", "gpu_arch", "kf_status", "status", "job_id"}});
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0]["gpu_arch"], "ovr_arch");  // regression: validate --run tested config.yaml's "cpu"
  EXPECT_EQ(kernels[0]["kf_status"], "reference_only");
  EXPECT_EQ(kernels[0]["job_status"], "VALIDATED");
  EXPECT_EQ(kernels[1]["gpu_arch"], "ovr_arch");
  EXPECT_EQ(kernels[1]["kf_status"], "value_mismatch");
  EXPECT_EQ(kernels[1]["job_status"], "COMPLETE");
  for (int64_t job : {1, 2}) EXPECT_EQ(store->GetJob(job)["config"]["test_timeout"], 77) << job;

  auto [qrc, table] = Kf("results --db " + db);
  ASSERT_EQ(qrc, 0) << table;
  EXPECT_NE(table.find("value_mismatch"), std::string::npos) << table;
  EXPECT_NE(table.find("reference_only"), std::string::npos) << table;
  if (GetParam() == Backend::kPostgres) {
    const std::string& password = testing::PgServer::Shared(nullptr)->password();
    for (const std::string* text : {&vout, &out, &table}) EXPECT_EQ(text->find(password), std::string::npos) << *text;
    EXPECT_EQ(testing::ReadFile(db_->tmp().path() / "out.json").find(password), std::string::npos);
  }
}

// An unusable --db fails before anything runs, and nothing is created (regression: "postgresql:" directory).
TEST_P(RunCliTest, UnknownDbSchemeFailsBeforeTheRun) {
  auto [rc, out] = RunShell("cd '" + db_->tmp().path().string() + "' && '" + kf_.string() + "' run '" +
                            dir_.string() + "' --db 'postgresq://postgres@127.0.0.1:5432/kf'");
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("kf: error: db: invalid database URL 'postgresq://postgres@127.0.0.1:5432/kf': unknown scheme"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("kf: ["), std::string::npos) << "no phase may start: " << out;
  EXPECT_FALSE(std::filesystem::exists(db_->tmp().path() / "postgresq:"));
}

// `kf validate --json --run` printed the run's lines after the JSON on stdout; stdout is now the JSON alone.
TEST(ValidateRunCli, JsonStdoutStaysJson) {
  std::filesystem::path kf = testing::BinaryDir() / "kf";
  if (!std::filesystem::exists(kf)) GTEST_SKIP() << "kf is not built (ninja kf)";
  testing::UseTestCache();
  testing::TempDir tmp;
  WritePyScale(tmp.path() / "py_scale");
  // In a group: RunShell appends its own "2>&1", which must not override ours.
  auto [rc, out] = RunShell("{ KF_CACHE_DIR='" + std::string(std::getenv("KF_CACHE_DIR")) + "' '" + kf.string() +
                            "' validate --json --run --no-store '" + (tmp.path() / "py_scale").string() + "' 2>'" +
                            (tmp.path() / "err").string() + "'; }");
  ASSERT_EQ(rc, 0) << out;
  Json doc = ParseJson(out, "stdout");  // throws when anything but the JSON document is on stdout
  EXPECT_EQ(doc["valid"], true);
  EXPECT_NE(testing::ReadFile(tmp.path() / "err").find("reference run: PASSED"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Backends, RunCliTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         testing::BackendParamName());

}  // namespace
}  // namespace kf
