// Store writes and reads on every backend (SQLite, PostgreSQL): tasks (golden to_database_task rows),
// kernels, job logs, transactions, concurrent writers, and the EvalResult → kernels helpers.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <regex>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/store_backends.hpp"
#include "test_util.hpp"

namespace kf {
namespace {

using testing::Backend;
using testing::Golden;
using testing::RunShell;

const std::regex kTimestamp(R"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6})");

class StoreTest : public testing::BackendTest {
 protected:
  std::string Value(const std::string& sql) const { return db_->Value(sql); }
  bool IsSqlite() const { return GetParam() == Backend::kSqlite; }
  /// The stored type of an expression as the backend names it (SQLite typeof, PostgreSQL pg_typeof).
  std::string TypeOf(const std::string& expr) const {
    return IsSqlite() ? "typeof(" + expr + ")" : "pg_typeof(" + expr + ")::text";
  }
  /// A timestamp column as UTC text "YYYY-MM-DD HH:MM:SS.ffffff".
  std::string UtcText(const std::string& column) const {
    return IsSqlite() ? column : "to_char(" + column + " AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')";
  }
};

TEST_P(StoreTest, InsertTaskFromGoldenRowAndIgnoreDuplicate) {
  for (const char* fixture : {"relu_cpu", "multi_block"}) {
    Json row = Golden(fixture)["to_database_task"];
    ASSERT_TRUE(row.is_object()) << fixture;
    EXPECT_TRUE(store_->InsertTask(row)) << fixture;
    EXPECT_FALSE(store_->InsertTask(row)) << fixture << ": duplicate id must be ignored";
    auto stored = store_->GetTask(row["id"].get<std::string>());
    ASSERT_TRUE(stored.has_value());
    for (const auto& [key, value] : row.items()) EXPECT_EQ((*stored)[key], value) << fixture << " " << key;
  }
  EXPECT_EQ(Value("SELECT count(*) FROM tasks"), "2");
  // Stored as SQLAlchemy does: booleans 0/1 (SQLite) or BOOLEAN, JSON columns as JSON text.
  Json relu = Golden("relu_cpu")["to_database_task"];
  std::string id = relu["id"];
  EXPECT_EQ(Value("SELECT " + TypeOf("has_build_step") + " || '|' || CAST(has_build_step AS VARCHAR) FROM tasks "
                  "WHERE id='" + id + "'"),
            IsSqlite() ? "integer|1" : "boolean|true");
  EXPECT_EQ(ParseJson(Value("SELECT correctness_tests FROM tasks WHERE id='" + id + "'"), "db"),
            relu["correctness_tests"]);
  EXPECT_EQ(Value("SELECT CASE WHEN hyperparameters_runtime IS NULL THEN 1 ELSE 0 END FROM tasks WHERE id='" + id +
                  "'"),
            "1");
  EXPECT_FALSE(store_->GetTask("0000").has_value());
}

TEST_P(StoreTest, InsertTaskMissingRequiredFieldNamesIt) {
  Json row = Golden("relu_cpu")["to_database_task"];
  row.erase("task_origin");
  try {
    store_->InsertTask(row);
    FAIL() << "expected kf::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.field(), "tasks.task_origin");
  }
  EXPECT_EQ(Value("SELECT count(*) FROM tasks"), "0");
}

TEST_P(StoreTest, InsertKernelStoresTypedValuesAndDefaults) {
  Json stats = {{"bmg", {{"TestX::test_benchmark", {{"mean", 1.23}, {"num_trials", 100}}}}}};
  Json row = {{"uuid", "u-1"},        {"task_name", "relu_cpu"}, {"task_id", std::string(64, 'a')},
              {"job_id", 7},          {"status", "correct"},     {"score", 5},
              {"runtime", 0.125},     {"runtime_stats", stats},  {"improve_over_native", 2.5},
              {"improve_over_compile", -1.0}, {"eval_log", "ok\n"}, {"template_results", Json::object()},
              {"gpu_arch", "bmg"},    {"config", {{"language", "sycl"}}}, {"Level_ID", 1},
              {"optimization_profile", Json::array({1, 2})}, {"prompt", nullptr}};
  int64_t id = store_->InsertKernel(row);
  EXPECT_EQ(id, 1);
  auto rows = store_->ListKernels({});
  ASSERT_EQ(rows.size(), 1u);
  const Json& r = rows[0];
  for (const auto& [key, value] : row.items()) EXPECT_EQ(r[key], value) << key;
  EXPECT_TRUE(std::regex_match(r["timestamp"].get<std::string>(), kTimestamp)) << r["timestamp"];
  EXPECT_EQ(r["db_user"], DefaultDbUser());
  EXPECT_TRUE(r["job_status"].is_null());  // job 7 does not exist
  EXPECT_TRUE(r["answer"].is_null());
  EXPECT_EQ(Value("SELECT " + TypeOf("runtime") + " || '|' || " + TypeOf("score") + " || '|' || " +
                  "CASE WHEN prompt IS NULL THEN 'null' ELSE 'set' END FROM kernels"),
            IsSqlite() ? "real|integer|null" : "double precision|integer|null");
  EXPECT_EQ(ParseJson(Value("SELECT runtime_stats FROM kernels"), "db"), stats);
  // An empty template_results object is stored as JSON "{}", a null one as SQL NULL.
  EXPECT_EQ(Value("SELECT template_results FROM kernels"), "{}");
}

TEST_P(StoreTest, InsertKernelRejectsUnknownColumnsAndWrongTypesAndWritesNothing) {
  auto expect_error = [&](const Json& row, const std::string& field, const std::string& text) {
    try {
      store_->InsertKernel(row);
      ADD_FAILURE() << "expected kf::Error for " << field;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_error({{"task_name", "t"}, {"speedup", 2.0}}, "kernels.speedup", "unknown column 'speedup'");
  expect_error({{"score", "5"}}, "kernels.score", "expected an integer, got string");
  expect_error({{"score", 4.5}}, "kernels.score", "expected an integer");
  expect_error({{"runtime", "fast"}}, "kernels.runtime", "expected a number");
  expect_error({{"task_name", 3}}, "kernels.task_name", "expected a string");
  expect_error({{"task_id", std::string(65, 'x')}}, "kernels.task_id", "at most 64");
  expect_error({{"agent_session_id", std::string(65, 'x')}}, "kernels.agent_session_id", "at most 64");
  expect_error(Json::array({1}), "kernels", "must be a JSON object");
  EXPECT_EQ(Value("SELECT count(*) FROM kernels"), "0");
  // 64 two-byte characters are 64 characters, not 128.
  std::string umlauts;
  for (int i = 0; i < 64; ++i) umlauts += "\xC3\xBC";
  EXPECT_GT(store_->InsertKernel({{"task_id", umlauts}}), 0);
}

TEST_P(StoreTest, ListKernelsFiltersByTaskJobAndLastN) {
  int64_t job_a = store_->CreateJob("custom", Json::object());
  int64_t job_b = store_->CreateJob("custom", Json::object());
  ASSERT_EQ(store_->UpdateJob(job_a, {.status = JobStatus::kRun}), JobUpdateOutcome::kUpdated);
  for (int i = 0; i < 6; ++i) {
    store_->InsertKernel({{"task_name", i % 2 ? "odd" : "even"}, {"job_id", i < 4 ? job_a : job_b}, {"trial", i}});
  }
  auto trials = [](const std::vector<Json>& rows) {
    std::vector<int> out;
    for (const auto& r : rows) out.push_back(r["trial"].get<int>());
    return out;
  };
  EXPECT_EQ(trials(store_->ListKernels({})), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(trials(store_->ListKernels({.last_n = 2})), (std::vector<int>{4, 5}));
  EXPECT_EQ(trials(store_->ListKernels({.task_name = "odd"})), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(trials(store_->ListKernels({.task_name = "odd", .last_n = 1})), (std::vector<int>{5}));
  EXPECT_EQ(trials(store_->ListKernels({.job_id = job_b})), (std::vector<int>{4, 5}));
  EXPECT_EQ(trials(store_->ListKernels({.task_name = "even", .job_id = job_a})), (std::vector<int>{0, 2}));
  EXPECT_TRUE(store_->ListKernels({.task_name = "none"}).empty());
  auto rows = store_->ListKernels({.last_n = 3, .columns = {"trial", "id"}});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(DumpJson(rows[0]), R"({"trial":3,"id":4,"job_status":"RUN"})");
  EXPECT_EQ(rows[2]["job_status"], "INIT");
  EXPECT_THROW(store_->ListKernels({.columns = {"nope"}}), Error);
}

TEST_P(StoreTest, JobLogsAreWrittenInOneTransaction) {
  int64_t job = store_->CreateJob("custom", nullptr);
  JobLog raw{.job_id = job, .hostname = "gpu-3", .kernel_uuid = "k-1", .level = "RAW",
             .message = "pytest output", .extra = {{"trial", 2}, {"version", 1}}};
  JobLog info{.job_id = job, .level = "INFO", .message = "started"};
  store_->InsertJobLogs({raw, info, info});
  auto rows = db_->Sql("SELECT job_id, hostname, kernel_uuid, level, message, extra FROM job_logs ORDER BY id");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{std::to_string(job), "gpu-3", "k-1", "RAW", "pytest output",
                                               R"({"trial":2,"version":1})"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{std::to_string(job), "NULL", "NULL", "INFO", "started", "NULL"}));
  EXPECT_TRUE(std::regex_match(Value("SELECT " + UtcText("timestamp") + " FROM job_logs WHERE id=1"), kTimestamp));
}

TEST_P(StoreTest, FailedBatchIsRolledBackCompletely) {
  int64_t job = store_->CreateJob("custom", nullptr);
  JobLog ok{.job_id = job, .message = "fine"};
  JobLog bad{.job_id = job, .level = std::string(17, 'L'), .message = "level too long"};
  try {
    store_->InsertJobLogs({ok, ok, bad, ok});  // the third row fails after two were inserted
    FAIL() << "expected kf::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "job_logs.level") << e.what();
  }
  EXPECT_EQ(Value("SELECT count(*) FROM job_logs"), "0");
  // The connection is usable afterwards and no transaction is left open.
  store_->InsertJobLogs({ok});
  EXPECT_EQ(Value("SELECT count(*) FROM job_logs"), "1");
}

TEST_P(StoreTest, ConcurrentWritersEachWithItsOwnStoreLoseNothing) {
  constexpr int kThreads = 4, kKernels = 25, kLogs = 10;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto store = Open();
        int64_t job = store->CreateJob("custom", {{"thread", t}});
        (void)store->UpdateJob(job, {.status = JobStatus::kRun, .started = true});
        for (int i = 0; i < kKernels; ++i) {
          store->InsertKernel({{"task_name", "t" + std::to_string(t)}, {"job_id", job}, {"trial", i}});
          if (i % 5 == 0) (void)store->UpdateJob(job, {.progress = i / double(kKernels)});
        }
        store->InsertJobLogs(std::vector<JobLog>(kLogs, JobLog{.job_id = job, .message = "m"}));
        (void)store->UpdateJob(job, {.status = JobStatus::kComplete});
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(Value("SELECT count(*) FROM kernels"), std::to_string(kThreads * kKernels));
  EXPECT_EQ(Value("SELECT count(DISTINCT task_name || '/' || trial) FROM kernels"),
            std::to_string(kThreads * kKernels));
  EXPECT_EQ(Value("SELECT count(*) FROM job_logs"), std::to_string(kThreads * kLogs));
  EXPECT_EQ(Value("SELECT count(*) FROM jobs WHERE status = 'COMPLETE' AND progress = 1.0"), std::to_string(kThreads));
}

TEST_P(StoreTest, OneStoreSharedByThreads) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) store_->InsertKernel({{"trial", i}});
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(store_->ListKernels({}).size(), 80u);
}

// Many writers at once, as a farm of workers: 4 threads x 3 stores each open a fresh database at the same
// moment (the tables are created once), all store the same task (exactly one insert reports it new, none
// fails) and write kernels, progress and logs of their own jobs and of one shared job.
TEST_P(StoreTest, ManyWritersOpenAFreshDatabaseAndShareTasksAndJobs) {
  constexpr int kThreads = 4, kStoresPerThread = 3, kKernels = 10;
  testing::TestDatabase fresh(GetParam());
  Json task = Golden("relu_cpu")["to_database_task"];
  int64_t shared_job = 0;
  std::atomic<int> ready{0}, new_tasks{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  std::mutex mu;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::vector<std::unique_ptr<Store>> stores;
        ++ready;
        while (ready.load() < kThreads) std::this_thread::yield();  // open together
        for (int s = 0; s < kStoresPerThread; ++s) stores.push_back(OpenStore(fresh.url()));
        {
          std::unique_lock lock(mu);
          if (shared_job == 0) shared_job = stores[0]->CreateJob("custom", {{"shared", true}});
        }
        for (auto& store : stores) {
          if (store->InsertTask(task)) ++new_tasks;
          int64_t job = store->CreateJob("custom", {{"thread", t}});
          for (int i = 0; i < kKernels; ++i) {
            store->InsertKernel({{"task_name", "t" + std::to_string(t)}, {"job_id", job}, {"trial", i}});
            (void)store->UpdateJob(shared_job, {.progress = i / double(kKernels)});
          }
          store->InsertJobLogs({JobLog{.job_id = shared_job, .message = "m"}, JobLog{.job_id = job, .message = "n"}});
          (void)store->UpdateJob(job, {.status = JobStatus::kComplete});
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(new_tasks.load(), 1);
  constexpr int kStores = kThreads * kStoresPerThread;
  EXPECT_EQ(fresh.Value("SELECT count(*) FROM tasks"), "1");
  EXPECT_EQ(fresh.Value("SELECT count(*) FROM kernels"), std::to_string(kStores * kKernels));
  EXPECT_EQ(fresh.Value("SELECT count(*) FROM job_logs"), std::to_string(2 * kStores));
  EXPECT_EQ(fresh.Value("SELECT count(*) FROM jobs WHERE status = 'COMPLETE' AND progress = 1.0"),
            std::to_string(kStores));
  EXPECT_EQ(fresh.Value("SELECT count(*) FROM jobs"), std::to_string(kStores + 1));
}

// The reference's Python tools read our rows: sqlite3 + json for SQLite, psycopg2 (what SQLAlchemy uses) for
// PostgreSQL, where the timestamp comes back timezone-aware.
TEST_P(StoreTest, PythonReadsRowsAsTheReferenceWould) {
  store_->InsertKernel({{"task_name", "relu_cpu"}, {"task_id", "abc"}, {"runtime_stats", {{"a", 1}}}, {"score", 5}});
  std::string script =
      IsSqlite() ? "import sqlite3, json, datetime, sys\n"
                   "c = sqlite3.connect(sys.argv[1])\n"
                   "ts, stats, score, user = c.execute('select timestamp, runtime_stats, score, db_user from "
                   "kernels').fetchone()\n"
                   "datetime.datetime.strptime(ts, '%Y-%m-%d %H:%M:%S.%f')\n"
                   "print(json.loads(stats)['a'], score, bool(user))\n"
                 : "import psycopg2, sys\n"
                   "c = psycopg2.connect(sys.argv[1]).cursor()\n"
                   "c.execute('select timestamp, runtime_stats, score, db_user from kernels')\n"
                   "ts, stats, score, user = c.fetchone()\n"
                   "assert ts.tzinfo is not None and ts.utcoffset().total_seconds() == 0, ts\n"
                   "print(stats['a'], score, bool(user))\n";
  testing::WriteFile(db_->tmp().path() / "read.py", script);
  auto [rc, out] = RunShell("/usr/bin/python3 '" + (db_->tmp().path() / "read.py").string() + "' '" + db_->url() + "'");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "1 5 True\n");
}

TEST(StoreHelpers, SplitProfilerDataMovesReferenceAndDetailEntries) {
  Json data = {{"ncu", {{"metrics", {{"dram", 0.5}}}, {"timeline", {1, 2}}, {"lineinfo", nullptr}}},
               {"ncu_ref", {{"metrics", {{"dram", 0.7}}}, {"lineinfo", "src:1"}}},
               {"vtune", {{"bound", "memory"}}},
               {"raw", "text"}};
  ProfilerDataColumns cols = SplitProfilerData(data);
  EXPECT_EQ(cols.profiler_data,
            (Json{{"ncu", {{"metrics", {{"dram", 0.5}}}, {"lineinfo", nullptr}}},
                  {"vtune", {{"bound", "memory"}}},
                  {"raw", "text"}}));
  EXPECT_EQ(cols.profiler_data_detail, (Json{{"ncu", {{"timeline", {1, 2}}}}}));
  EXPECT_EQ(cols.profiler_data_reference, (Json{{"ncu", {{"metrics", {{"dram", 0.7}}}}}}));
  EXPECT_EQ(cols.profiler_data_detail_reference, (Json{{"ncu", {{"lineinfo", "src:1"}}}}));

  ProfilerDataColumns none = SplitProfilerData(Json::object());
  EXPECT_TRUE(none.profiler_data.is_null() && none.profiler_data_reference.is_null() &&
              none.profiler_data_detail.is_null() && none.profiler_data_detail_reference.is_null());
  ProfilerDataColumns only_candidate = SplitProfilerData({{"ncu", {{"metrics", 1}}}});
  EXPECT_TRUE(only_candidate.profiler_data_reference.is_null());
  EXPECT_TRUE(only_candidate.profiler_data_detail.is_null());
}

TEST(StoreHelpers, SplitWorkerInfosKeepsObjectEntriesPerArch) {
  Json metadata = {{"bmg", {{"compile_worker_info", {{"hostname", "b1"}}}, {"eval_worker_info", {{"hostname", "b2"}}}}},
                   {"lnl", {{"eval_worker_info", {{"hostname", "l1"}}}, {"compile_worker_info", Json::object()}}},
                   {"error", "Reference test failed"}};
  WorkerInfoColumns cols = SplitWorkerInfos(metadata);
  EXPECT_EQ(cols.compile_worker_info, (Json{{"bmg", {{"hostname", "b1"}}}}));
  EXPECT_EQ(cols.eval_worker_info, (Json{{"bmg", {{"hostname", "b2"}}}, {"lnl", {{"hostname", "l1"}}}}));
  EXPECT_EQ(SplitWorkerInfos(nullptr).eval_worker_info, Json::object());
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         testing::BackendParamName());

TEST(StoreHelpers, TimestampsUserAndDefaultPath) {
  EXPECT_TRUE(std::regex_match(NowTimestamp(), kTimestamp)) << NowTimestamp();
  EXPECT_FALSE(DefaultDbUser().empty());
  ::unsetenv("KF_DB");
  EXPECT_EQ(DefaultDbPath(), std::filesystem::path("runs/kernels.sqlite3"));
  ::setenv("KF_DB", "/tmp/x.sqlite3", 1);
  EXPECT_EQ(DefaultDbPath(), std::filesystem::path("/tmp/x.sqlite3"));
  ::unsetenv("KF_DB");
}

}  // namespace
}  // namespace kf
