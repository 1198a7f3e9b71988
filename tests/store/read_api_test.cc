// The read APIs of the web view on every backend: jobs pages with filters, job logs, one kernel, per-task
// summaries, task histories, kernels pages with sort/filters/paging, and counts.
#include <gtest/gtest.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/store_backends.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Backend;
using testing::ExpectError;

class ReadApiTest : public testing::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_TRUE(store_->InsertTask({{"id", "hash-alpha"}, {"task_name", "alpha"}, {"task_origin", "custom"},
                                    {"has_build_step", false}}));
    ASSERT_TRUE(store_->InsertTask({{"id", "hash-beta"}, {"task_name", "beta"}, {"task_origin", "custom"},
                                    {"has_build_step", false}}));
    // Jobs 1..5: alpha, alpha, beta, alpha (FAIL), no task (INIT).
    for (const char* task : {"hash-alpha", "hash-alpha", "hash-beta", "hash-alpha"}) {
      int64_t job = store_->CreateJob("custom", Json::object());
      (void)store_->UpdateJob(job, {.status = JobStatus::kComplete, .task_id = std::string(task)});
    }
    (void)store_->UpdateJob(4, {.status = JobStatus::kFail});  // COMPLETE is not final: FAIL overrides
    store_->CreateJob("custom", nullptr);
    // Kernels 1..7 (our status in kf_status and, as kf writes it, eval_log's first line; kernel 6 written "by the
    // reference").
    struct K {
      const char* task;
      int64_t job;
      const char* status;
      const char* kf;  // nullptr: no "kf status:" line
      int score;
      Json speedup;
    };
    const std::vector<K> ks = {{"alpha", 1, "correct", "correct", 5, 1.5},
                               {"alpha", 1, "compiled", "value_mismatch", 4, -1.0},
                               {"alpha", 2, "correct", "correct", 5, 3.25},
                               {"beta", 3, "error", "build_error", 1, -1.0},
                               {"alpha", 2, "correct", "no_reference", 5, 9.999e-10},
                               {"beta", 3, "correct", nullptr, 5, 2.0},
                               {"alpha", 4, "compiled", "crash", 2, nullptr}};
    for (const K& k : ks) {
      std::string log = k.kf != nullptr ? std::string("kf status: ") + k.kf + " (detail)\nlog text" : "plain log";
      store_->InsertKernel({{"task_name", k.task}, {"job_id", k.job}, {"status", k.status}, {"score", k.score},
                            {"improve_over_native", k.speedup}, {"eval_log", log},
                            {"kf_status", k.kf != nullptr ? Json(k.kf) : Json(nullptr)}});
    }
    store_->InsertJobLogs({JobLog{.job_id = 2, .kernel_uuid = "u3", .level = "RAW", .message = "build output",
                                  .extra = {{"log", "build custom"}}},
                           JobLog{.job_id = 1, .message = "other job"},
                           JobLog{.job_id = 2, .message = "second"}});
  }
  static std::vector<int64_t> Ids(const std::vector<Json>& rows) {
    std::vector<int64_t> out;
    for (const auto& r : rows) out.push_back(r["id"].get<int64_t>());
    return out;
  }
};

TEST_P(ReadApiTest, ListJobsNewestFirstWithFiltersAndPaging) {
  EXPECT_EQ(Ids(store_->ListJobs({})), (std::vector<int64_t>{5, 4, 3, 2, 1}));
  EXPECT_EQ(Ids(store_->ListJobs({.task_name = "alpha"})), (std::vector<int64_t>{4, 2, 1}));
  EXPECT_EQ(Ids(store_->ListJobs({.status = JobStatus::kComplete})), (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(Ids(store_->ListJobs({.task_name = "alpha", .status = JobStatus::kComplete})),
            (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Ids(store_->ListJobs({.limit = 2})), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(Ids(store_->ListJobs({.limit = 2, .offset = 2})), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Ids(store_->ListJobs({.offset = 4})), (std::vector<int64_t>{1}));
  EXPECT_EQ(store_->CountJobs({.task_name = "alpha", .limit = 1}), 3);
  EXPECT_EQ(store_->CountJobs({}), 5);
  auto rows = store_->ListJobs({.task_name = "beta"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["task_name"], "beta");
  EXPECT_EQ(rows[0]["kernels"], 2);
  EXPECT_EQ(rows[0]["status"], "COMPLETE");
  EXPECT_EQ(rows[0]["task_id"], "hash-beta");
  EXPECT_EQ(rows[0]["created_at"].get<std::string>().size(), 26u);
  auto none = store_->ListJobs({.status = JobStatus::kInit});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(none[0]["task_name"].is_null());
  EXPECT_EQ(none[0]["kernels"], 0);
  ExpectError(ErrorKind::kInvalidArgument, [&] { store_->ListJobs({.limit = -1}); });
}

TEST_P(ReadApiTest, JobLogsAndOneKernel) {
  auto logs = store_->ListJobLogs(2);
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0]["message"], "build output");
  EXPECT_EQ(logs[0]["level"], "RAW");
  EXPECT_EQ(logs[0]["kernel_uuid"], "u3");
  EXPECT_EQ(logs[0]["extra"], (Json{{"log", "build custom"}}));
  EXPECT_EQ(logs[1]["message"], "second");
  EXPECT_TRUE(store_->ListJobLogs(99).empty());

  auto k = store_->GetKernel(2);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ((*k)["kf_status"], "value_mismatch");
  EXPECT_EQ((*k)["job_status"], "COMPLETE");
  EXPECT_EQ((*k)["score"], 4);
  EXPECT_EQ((*k)["eval_log"], "kf status: value_mismatch (detail)\nlog text");
  EXPECT_TRUE((*store_->GetKernel(6))["kf_status"].is_null());
  EXPECT_EQ((*store_->GetKernel(7))["job_status"], "FAIL");
  EXPECT_FALSE(store_->GetKernel(99).has_value());
}

TEST_P(ReadApiTest, TaskSummariesCountByBothStatusesAndKeepTheBestRealSpeedup) {
  auto summaries = store_->ListTaskSummaries();
  ASSERT_EQ(summaries.size(), 2u);
  const TaskSummary& alpha = summaries[0];
  EXPECT_EQ(alpha.task_name, "alpha");
  EXPECT_EQ(alpha.kernels, 5);
  EXPECT_EQ(alpha.by_kf_status,
            (std::map<std::string, int64_t>{{"correct", 2}, {"crash", 1}, {"no_reference", 1}, {"value_mismatch", 1}}));
  EXPECT_EQ(alpha.by_status, (std::map<std::string, int64_t>{{"compiled", 2}, {"correct", 3}}));
  ASSERT_TRUE(alpha.best_speedup.has_value());
  EXPECT_DOUBLE_EQ(*alpha.best_speedup, 3.25);  // 9.999e-10 (no reference) and -1 are not speedups
  EXPECT_EQ(alpha.last_timestamp, (*store_->GetKernel(7))["timestamp"]);
  const TaskSummary& beta = summaries[1];
  EXPECT_EQ(beta.by_kf_status, (std::map<std::string, int64_t>{{"", 1}, {"build_error", 1}}));
  EXPECT_DOUBLE_EQ(beta.best_speedup.value_or(0), 2.0);
  Json j = beta.ToJson();
  EXPECT_EQ(j["kernels"], 2);
  EXPECT_EQ(j["by_status"], (Json{{"correct", 1}, {"error", 1}}));
  // A task whose kernels are all wrong has no best speedup.
  store_->InsertKernel({{"task_name", "gamma"}, {"status", "compiled"}, {"score", 3}, {"improve_over_native", 7.0}});
  auto gamma = store_->ListTaskSummaries().back();
  EXPECT_EQ(gamma.task_name, "gamma");
  EXPECT_FALSE(gamma.best_speedup.has_value());
  EXPECT_TRUE(gamma.ToJson()["best_speedup"].is_null());
}

TEST_P(ReadApiTest, HistoryOfATaskForPlots) {
  auto points = store_->KernelHistory({.task_name = "alpha"});
  std::vector<int64_t> ids;
  for (const auto& p : points) ids.push_back(p.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 2, 3, 5, 7}));
  EXPECT_EQ(points[1].kf_status, "value_mismatch");
  EXPECT_EQ(points[1].status, "compiled");
  EXPECT_EQ(points[1].score, 4);
  EXPECT_DOUBLE_EQ(points[2].speedup.value_or(0), 3.25);
  EXPECT_FALSE(points[4].speedup.has_value());
  EXPECT_EQ(points[0].timestamp.size(), 26u);
  auto polled = store_->KernelHistory({.task_name = "alpha", .after_id = 2, .limit = 2});
  ASSERT_EQ(polled.size(), 2u);
  EXPECT_EQ(polled[0].id, 3);
  EXPECT_EQ(polled[1].id, 5);
  EXPECT_EQ(polled[0].ToJson()["speedup"], 3.25);
  EXPECT_TRUE(store_->KernelHistory({.task_name = "none"}).empty());
}

TEST_P(ReadApiTest, KernelPagesSortFilterAndCount) {
  // Speedup, largest first; NULL is the smallest value (last when descending, first when ascending).
  KernelQuery by_speedup{.task_name = "alpha", .sort = KernelSort::kSpeedup, .descending = true,
                         .columns = {"id", "improve_over_native", "kf_status"}};
  EXPECT_EQ(Ids(store_->ListKernels(by_speedup)), (std::vector<int64_t>{3, 1, 5, 2, 7}));
  by_speedup.descending = false;
  EXPECT_EQ(Ids(store_->ListKernels(by_speedup)), (std::vector<int64_t>{7, 2, 5, 1, 3}));
  by_speedup.limit = 2;
  by_speedup.offset = 1;
  EXPECT_EQ(Ids(store_->ListKernels(by_speedup)), (std::vector<int64_t>{2, 5}));
  by_speedup.limit = 0;
  by_speedup.offset = 0;
  EXPECT_EQ(Ids(store_->ListKernels({.sort = KernelSort::kId, .descending = true, .columns = {"id"}})),
            (std::vector<int64_t>{7, 6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(Ids(store_->ListKernels({.limit = 3, .offset = 2, .descending = true, .columns = {"id"}})),
            (std::vector<int64_t>{5, 4, 3}));
  EXPECT_EQ(Ids(store_->ListKernels({.offset = 5, .columns = {"id"}})), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(Ids(store_->ListKernels({.status = "correct", .columns = {"id"}})), (std::vector<int64_t>{1, 3, 5, 6}));
  EXPECT_EQ(Ids(store_->ListKernels({.kf_status = "correct", .columns = {"id"}})), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Ids(store_->ListKernels({.task_name = "alpha", .kf_status = "crash", .columns = {"id"}})),
            (std::vector<int64_t>{7}));
  EXPECT_EQ(store_->CountKernels({.task_name = "alpha", .limit = 1}), 5);
  EXPECT_EQ(store_->CountKernels({.status = "correct", .kf_status = "correct"}), 2);
  EXPECT_EQ(Ids(store_->ListKernels({.limit = 2, .sort = KernelSort::kScore, .descending = true, .columns = {"id"}})),
            (std::vector<int64_t>{6, 5}));
  auto rows = store_->ListKernels(by_speedup);  // ascending: kernel 7 (no speedup) first
  EXPECT_EQ(rows[0]["kf_status"], "crash");
  EXPECT_EQ(rows[0]["job_status"], "FAIL");
  EXPECT_EQ(rows[1]["kf_status"], "value_mismatch");
  EXPECT_EQ(rows[1]["job_status"], "COMPLETE");
  // Every column plus the virtual kf_status when no columns are named.
  auto all = store_->ListKernels({.last_n = 1});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["kf_status"], "crash");
  EXPECT_TRUE(all[0].contains("db_user"));
  ExpectError(ErrorKind::kInvalidArgument, [&] { store_->ListKernels({.last_n = 2, .limit = 1}); });
  ExpectError(ErrorKind::kInvalidArgument, [&] { store_->ListKernels({.offset = -1}); });
  EXPECT_EQ(ParseKernelSort("speedup"), KernelSort::kSpeedup);
  ExpectError(ErrorKind::kInvalidArgument, [] { ParseKernelSort("fastest"); });
}

// A database written before kernels.kf_status existed (by the reference, or by an older kf, which kept our status
// in eval_log's first line and in a table kf_kernel_status): opened read-only, kf_status reads NULL and every read
// still works; the first read-write open adds the column, fills it from eval_log (once) and drops the old table.
TEST_P(ReadApiTest, OlderDatabaseReadsWithoutOurStatusAndIsMigratedOnceOnReadWriteOpen) {
  auto expect_statuses = [](Store& store) {
    auto summaries = store.ListTaskSummaries();
    ASSERT_EQ(summaries.size(), 2u);
    EXPECT_EQ(summaries[0].by_kf_status,
              (std::map<std::string, int64_t>{{"correct", 2}, {"crash", 1}, {"no_reference", 1}, {"value_mismatch", 1}}));
    EXPECT_EQ(summaries[1].by_kf_status, (std::map<std::string, int64_t>{{"", 2}, {"build_error", 1}}));
    EXPECT_EQ(store.KernelHistory({.task_name = "alpha"})[1].kf_status, "value_mismatch");
    EXPECT_EQ(Ids(store.ListKernels({.kf_status = "correct", .columns = {"id"}})), (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(store.CountKernels({.kf_status = "crash"}), 1);
    EXPECT_EQ((*store.GetKernel(2))["kf_status"], "value_mismatch");
    EXPECT_TRUE((*store.GetKernel(6))["kf_status"].is_null());
  };
  const bool sqlite = GetParam() == Backend::kSqlite;
  // The older layout: no kf_status column, our former table beside the reference's.
  db_->Sql("DROP INDEX IF EXISTS kf_ix_kernels_kf_status");
  db_->Sql("ALTER TABLE kernels DROP COLUMN kf_status");
  db_->Sql("CREATE TABLE kf_kernel_status (kernel_id INTEGER NOT NULL, task_name VARCHAR, kf_status VARCHAR(32), "
           "PRIMARY KEY (kernel_id))");
  // A first line whose word does not fit VARCHAR(32) is not a status of ours (and must not fail PostgreSQL).
  db_->Sql("INSERT INTO kernels (task_name, db_user, eval_log) VALUES ('beta', 'u', 'kf status: " +
           std::string(33, 'x') + "\nlog')");
  const std::string columns_sql = sqlite ? "SELECT count(*) FROM pragma_table_info('kernels')"
                                             : "SELECT count(*) FROM information_schema.columns WHERE table_name = "
                                               "'kernels' AND table_schema = 'public'";
  const std::string columns_before = db_->Value(columns_sql);

  auto reader = Open({.read_only = true});
  auto summaries = reader->ListTaskSummaries();
  ASSERT_EQ(summaries.size(), 2u);
  EXPECT_EQ(summaries[0].by_kf_status, (std::map<std::string, int64_t>{{"", 5}}));
  EXPECT_EQ(summaries[1].by_kf_status, (std::map<std::string, int64_t>{{"", 3}}));
  EXPECT_EQ(summaries[0].by_status, (std::map<std::string, int64_t>{{"compiled", 2}, {"correct", 3}}));
  EXPECT_EQ(reader->KernelHistory({.task_name = "alpha"})[1].kf_status, "");
  EXPECT_TRUE(reader->ListKernels({.kf_status = "correct"}).empty());
  EXPECT_EQ(reader->CountKernels({.kf_status = "crash"}), 0);
  Json two = *reader->GetKernel(2);
  EXPECT_TRUE(two["kf_status"].is_null());
  EXPECT_EQ(two["status"], "compiled");
  EXPECT_EQ(reader->ListKernels({.last_n = 2}).size(), 2u);
  EXPECT_EQ(db_->Value(columns_sql), columns_before);  // read-only changed nothing

  auto writer = Open();  // migrates: adds and fills kf_status, drops kf_kernel_status
  EXPECT_EQ(db_->Value("SELECT kf_status FROM kernels WHERE id = 2"), "value_mismatch");
  EXPECT_EQ(db_->Value("SELECT count(*) FROM kernels WHERE kf_status IS NULL"), "2");  // kernel 6 and kernel 8
  EXPECT_EQ(db_->Value(sqlite ? "SELECT count(*) FROM sqlite_master WHERE name = 'kf_kernel_status'"
                                  : "SELECT count(*) FROM information_schema.tables WHERE table_name = "
                                    "'kf_kernel_status'"),
            "0");
  expect_statuses(*writer);
  // Once: a later open does not derive statuses from eval_log again, and new rows carry their own.
  db_->Sql("UPDATE kernels SET kf_status = 'crash' WHERE id = 1");
  Open();
  EXPECT_EQ(db_->Value("SELECT kf_status FROM kernels WHERE id = 1"), "crash");
  writer->InsertKernel({{"task_name", "beta"}, {"kf_status", "timeout"}, {"eval_log", "kf status: correct\n"}});
  EXPECT_EQ(writer->ListTaskSummaries()[1].by_kf_status["timeout"], 1);
  EXPECT_EQ(writer->ListTaskSummaries()[1].by_kf_status.count("correct"), 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, ReadApiTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         testing::BackendParamName());

}  // namespace
}  // namespace kf
