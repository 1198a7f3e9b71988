// store_bench — page times of the store's read APIs (the pages of `kf serve`, issue 13: first byte of any API
// page < 100 ms on the 2-core machine) with 100,000 kernel rows, on SQLite and — when its server binaries are
// installed — on a throwaway PostgreSQL (tests/store/pg_server.hpp). Every query is also timed on a database
// of 1,000 rows made the same way: that is the in-run baseline, and the ratio shows whether a page stays the
// size of a page (ratio near 1: an index answers it) or grows with the table (a scan).
// Rows look like kf's: 10 tasks, 5 kernels per job, codes of ~500 bytes, an eval_log of ~1 KB starting with
// "kf status: …", runtime stats and config JSON, one job log per job.
//
// Usage: store_bench [ROWS]   (default 100000; the baseline is always 1,000 rows)
//   KF_BENCH_KEEP=1            keep the SQLite files (path printed)
//   KF_BENCH_PG_URL=URL        use this PostgreSQL server (postgresql://user:pw@host:port/, no database: two
//                              databases kf_bench_{small,big}_<pid> are created there and kept) instead of a
//                              throwaway one
// In-process CPU ms are shown for SQLite (the work is done in this process); PostgreSQL's work happens in
// the server, so only wall ms are shown for it.
#include <libpq-fe.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../tests/store/pg_server.hpp"
#include "kernelfoundry/store.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const std::vector<std::string> kStatuses = {"correct", "value_mismatch", "shape_mismatch", "build_error", "crash",
                                            "test_timeout"};

double Ms(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double CpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

/// Runs one statement on the PostgreSQL database `url` (VACUUM cannot run inside the store's transactions).
void PgExec(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  PGresult* res = PQexec(conn, sql.c_str());
  bool ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
  std::string msg = ok ? "" : PQerrorMessage(conn);
  PQclear(res);
  PQfinish(conn);
  if (!ok) throw std::runtime_error(sql + ": " + msg);
}

/// Inserts `rows` kernels (and their tasks, jobs and logs) through the Store API; returns seconds.
double Fill(kf::Store& store, int64_t rows) {
  auto t0 = Clock::now();
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> speed(0.2, 4.0);
  const std::string code(500, 'c');
  const std::string log_body(1000, 'l');
  for (int t = 0; t < 10; ++t) {
    store.InsertTask({{"id", "hash-" + std::to_string(t)}, {"task_name", "task_" + std::to_string(t)},
                      {"task_origin", "custom"}, {"has_build_step", true}});
  }
  int64_t job = 0;
  for (int64_t i = 0; i < rows; ++i) {
    int task = static_cast<int>((i / 5) % 10);  // a job's 5 kernels belong to one task
    if (i % 5 == 0) {
      job = store.CreateJob("custom", {{"task_name", "task_" + std::to_string(task)}, {"test_timeout", 120}});
      (void)store.UpdateJob(job, {.status = kf::JobStatus::kComplete, .task_id = "hash-" + std::to_string(task)});
      store.InsertJobLogs({kf::JobLog{.job_id = job, .level = "RAW", .message = log_body}});
    }
    const std::string& status = kStatuses[rng() % kStatuses.size()];
    bool correct = status == "correct";
    kf::Json row = {{"uuid", "u-" + std::to_string(i)},
                    {"task_name", "task_" + std::to_string(task)},
                    {"job_id", job},
                    {"status", correct ? "correct" : (status == "build_error" ? "error" : "compiled")},
                    {"score", correct ? 5 : 3},
                    {"runtime", correct ? speed(rng) : -1.0},
                    {"improve_over_native", correct ? speed(rng) : -1.0},
                    {"input_code", code},
                    {"output_code", code},
                    {"eval_log", "kf status: " + status + " (detail)\n" + log_body},
                    {"kf_status", status},
                    {"runtime_stats", {{"cpu", {{"mean", 1.0}, {"std", 0.1}, {"num_trials", 100}}}}},
                    {"config", {{"task_name", "task_" + std::to_string(task)}, {"gpu_arch", "cpu"}}},
                    {"gpu_arch", "cpu"},
                    {"task_id", "hash-" + std::to_string(task)}};
    store.InsertKernel(row);
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Query {
  std::string name;
  std::function<size_t(kf::Store&, int64_t rows)> run;  ///< returns the number of items (a sanity check)
};

std::vector<Query> Queries() {
  return {
      {"kernels page 1 (50 newest, all columns)",
       [](kf::Store& s, int64_t) { return s.ListKernels({.limit = 50, .descending = true}).size(); }},
      {"kernels deep page (offset rows/2)",
       [](kf::Store& s, int64_t rows) {
         return s.ListKernels({.limit = 50, .offset = rows / 2, .descending = true}).size();
       }},
      {"task kernels by speedup (50 fastest)",
       [](kf::Store& s, int64_t) {
         return s.ListKernels({.task_name = "task_3", .limit = 50, .sort = kf::KernelSort::kSpeedup, .descending = true})
             .size();
       }},
      {"task kernels with kf_status=value_mismatch (50)",
       [](kf::Store& s, int64_t) {
         return s.ListKernels({.task_name = "task_3", .kf_status = "value_mismatch", .limit = 50, .descending = true})
             .size();
       }},
      {"count kernels of a task", [](kf::Store& s, int64_t) { return size_t(s.CountKernels({.task_name = "task_3"})); }},
      {"jobs page 1 (50 newest)", [](kf::Store& s, int64_t) { return s.ListJobs({.limit = 50}).size(); }},
      {"jobs of a task, COMPLETE (50)",
       [](kf::Store& s, int64_t) {
         return s.ListJobs({.task_name = "task_3", .status = kf::JobStatus::kComplete, .limit = 50}).size();
       }},
      {"count jobs", [](kf::Store& s, int64_t) { return size_t(s.CountJobs({})); }},
      {"task summaries (all tasks)", [](kf::Store& s, int64_t) { return s.ListTaskSummaries().size(); }},
      {"history of a task (all points)",
       [](kf::Store& s, int64_t) { return s.KernelHistory({.task_name = "task_3"}).size(); }},
      {"history page (2,000 points)",
       [](kf::Store& s, int64_t) { return s.KernelHistory({.task_name = "task_3", .limit = 2000}).size(); }},
      {"history poll (points after the last 100 ids)",
       [](kf::Store& s, int64_t rows) {
         return s.KernelHistory({.task_name = "task_3", .after_id = rows - 100, .limit = 1000}).size();
       }},
      {"one kernel (all columns)", [](kf::Store& s, int64_t rows) { return size_t(s.GetKernel(rows / 2).has_value()); }},
      {"job logs of a job", [](kf::Store& s, int64_t rows) { return s.ListJobLogs(rows / 10).size(); }},
  };
}

/// Median of 5 timed runs after one warm-up: wall ms, and in *cpu_ms this process's CPU ms.
double Time(const Query& q, kf::Store& store, int64_t rows, size_t* items, double* cpu_ms) {
  *items = q.run(store, rows);
  std::vector<double> ms, cpu;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    double c0 = CpuMs();
    q.run(store, rows);
    ms.push_back(Ms(t0));
    cpu.push_back(CpuMs() - c0);
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu.begin(), cpu.end());
  *cpu_ms = cpu[2];
  return ms[2];
}

void Report(const std::string& backend, const std::string& small_url, const std::string& big_url, int64_t rows,
            bool in_process, const std::function<void()>& after_fill = {}) {
  constexpr int64_t kBaseRows = 1000;
  auto small = kf::OpenStore(small_url);
  double fill_small = Fill(*small, kBaseRows);
  auto big = kf::OpenStore(big_url);
  double fill_big = Fill(*big, rows);
  std::printf("\n%s: inserted %lld rows in %.1f s (%.0f kernels/s through InsertKernel, one transaction each)\n",
              backend.c_str(), static_cast<long long>(rows), fill_big, rows / fill_big);
  (void)fill_small;
  if (after_fill) after_fill();
  auto reader_small = kf::OpenStore(small_url, {.read_only = true});
  auto reader_big = kf::OpenStore(big_url, {.read_only = true});
  std::printf("  %-46s %10s %12s %8s %7s %s\n", "query (read-only store)", "1k rows ms", "big rows ms", "ratio",
              "items", in_process ? "   cpu ms" : "");
  for (const Query& q : Queries()) {
    size_t items_small = 0, items_big = 0;
    double cpu_small = 0, cpu = 0;
    double base = Time(q, *reader_small, kBaseRows, &items_small, &cpu_small);
    double ms = Time(q, *reader_big, rows, &items_big, &cpu);
    std::string cpu_text = in_process ? fmt::format("{:9.2f}", cpu) : "";
    std::printf("  %-46s %10.2f %12.2f %8.1f %7zu %s%s\n", q.name.c_str(), base, ms, ms / std::max(base, 1e-3),
                items_big, cpu_text.c_str(), ms > 100 ? "   > 100 ms wall" : "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = argc > 1 ? std::atoll(argv[1]) : 100000;
  if (rows < 1000) rows = 1000;
  std::string tmpl = (fs::temp_directory_path() / "kf_store_bench_XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return 1;
  fs::path dir = tmpl;
  std::printf("store_bench: %lld kernel rows vs a 1,000-row baseline (median of 5 runs after a warm-up)\n",
              static_cast<long long>(rows));
  int rc = 0;
  try {
    if (std::getenv("KF_BENCH_NO_SQLITE") == nullptr) {
      Report("SQLite", (dir / "small.sqlite3").string(), (dir / "big.sqlite3").string(), rows, true);
    }
    // What autovacuum does to an insert-heavy table within about a minute (visibility map for index-only
    // scans, planner statistics), done at once so the timings show the steady state.
    auto report_pg = [rows](const std::string& small, const std::string& big) {
      Report("PostgreSQL (after VACUUM ANALYZE)", small, big, rows, false, [small, big] {
        PgExec(small, "VACUUM ANALYZE");
        PgExec(big, "VACUUM ANALYZE");
      });
    };
    std::string why;
    if (const char* base = std::getenv("KF_BENCH_PG_URL"); base != nullptr && *base != '\0') {
      std::string pid = std::to_string(::getpid());
      report_pg(std::string(base) + "kf_bench_small_" + pid, std::string(base) + "kf_bench_big_" + pid);
    } else if (kf::testing::PgServer* pg = kf::testing::PgServer::Shared(&why)) {
      report_pg(pg->Url(pg->NewDatabase()), pg->Url(pg->NewDatabase()));
    } else {
      std::printf("\nPostgreSQL: skipped (%s)\n", why.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_bench: %s\n", e.what());
    rc = 1;
  }
  std::error_code ec;
  if (std::getenv("KF_BENCH_KEEP") == nullptr) {
    fs::remove_all(dir, ec);
  } else {
    std::printf("kept %s (KF_BENCH_KEEP)\n", dir.c_str());
  }
  return rc;
}
