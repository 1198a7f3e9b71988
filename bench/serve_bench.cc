// serve_bench — time to first byte of kf serve's API pages (issue 13: < 100 ms for any page with 100,000 stored
// evaluations on the 2-core machine). A kf::Server runs in this process on a free 127.0.0.1 port over a SQLite
// database filled through the Store API; each page is requested over a plain TCP socket and the time from
// sending the request to the first byte of the answer is taken (median and max of 5 requests after one
// warm-up). The same pages over a 1,000-row database made the same way are the in-run baseline: a ratio near
// 1 means an index answers the page.
//
// With KF_PLAYWRIGHT (the playwright-core package the browser test installs) it also prints the first paint of the
// pages in headless chromium (bench/serve_first_paint.cjs).
//
// Usage: serve_bench [ROWS]   (default 100000)   KF_BENCH_KEEP=1 keeps the database files (path printed).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kernelfoundry/serve.hpp"
#include "kernelfoundry/store.hpp"
#include "bench_paths.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const std::vector<std::string> kStatuses = {"correct", "correct", "value_mismatch", "build_error", "crash", "timeout"};

/// `rows` kernels over 10 tasks (5 per job, one job log per job), shaped like kf run's rows.
void Fill(kf::Store& store, int64_t rows) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> speed(0.2, 4.0);
  const std::string code(600, 'c');
  const std::string log(1500, 'l');
  for (int t = 0; t < 10; ++t) {
    store.InsertTask({{"id", fmt::format("hash-{}", t)}, {"task_name", fmt::format("task_{}", t)},
                      {"task_origin", "custom"}, {"has_build_step", true}});
  }
  int64_t job = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const int task = static_cast<int>((i / 5) % 10);
    if (i % 5 == 0) {
      job = store.CreateJob("custom", {{"task_name", fmt::format("task_{}", task)}});
      (void)store.UpdateJob(job, {.status = kf::JobStatus::kComplete, .task_id = fmt::format("hash-{}", task)});
      store.InsertJobLogs({kf::JobLog{.job_id = job, .kernel_uuid = fmt::format("u-{}", i), .level = "RAW",
                                      .message = "build", .extra = {{"log", "Return code: 0\n" + log}}}});
    }
    const std::string& status = kStatuses[rng() % kStatuses.size()];
    const bool ok = status == "correct";
    const double s = speed(rng);
    store.InsertKernel({{"uuid", fmt::format("u-{}", i)},
                        {"task_name", fmt::format("task_{}", task)},
                        {"job_id", job},
                        {"status", ok ? "correct" : status == "build_error" ? "error" : "compiled"},
                        {"score", ok ? 5 : 3},
                        {"runtime", ok ? 2.0 / s : -1.0},
                        {"improve_over_native", ok ? s : -1.0},
                        {"input_code", code},
                        {"output_code", code},
                        {"eval_log", "kf status: " + status + "\n" + log},
                        {"kf_status", status},
                        {"runtime_stats", ok ? kf::Json{{"bench", {{"mean", 2.0 / s}, {"std", 0.01}, {"ref_speed", 2.0},
                                                                   {"speedup", s}, {"num_trials", 20}}}}
                                             : kf::Json(nullptr)},
                        {"gpu_arch", "cpu"},
                        {"task_id", fmt::format("hash-{}", task)}});
  }
}

/// Milliseconds from sending GET `path` to the first byte of the answer; also checks the status line.
double FirstByteMs(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw std::runtime_error("connect failed");
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  auto t0 = Clock::now();
  if (send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size())) throw std::runtime_error("send failed");
  char buf[65536];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::string head(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  close(fd);
  if (head.rfind("HTTP/1.1 200", 0) != 0) throw std::runtime_error(path + ": " + head.substr(0, head.find('\r')));
  return ms;
}

struct Timing {
  double median = 0, max = 0;
};

Timing Measure(int port, const std::string& path) {
  FirstByteMs(port, path);  // warm-up
  std::vector<double> v;
  for (int i = 0; i < 5; ++i) v.push_back(FirstByteMs(port, path));
  std::sort(v.begin(), v.end());
  return {v[2], v.back()};
}

struct Running {
  std::unique_ptr<kf::Server> server;
  std::thread thread;
  explicit Running(const std::string& db) {
    server = std::make_unique<kf::Server>(kf::OpenStore(db, {.read_only = true}), kf::ServeOptions{.port = 0});
    server->Bind();
    thread = std::thread([this] { server->Run(); });
  }
  ~Running() {
    server->Stop();
    thread.join();
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 100000;
  const fs::path dir = fs::temp_directory_path() / fmt::format("kf_serve_bench_{}", getpid());
  fs::create_directories(dir);
  const std::string small = (dir / "small.sqlite3").string(), big = (dir / "big.sqlite3").string();
  auto t0 = Clock::now();
  Fill(*kf::OpenStore(small), 1000);
  Fill(*kf::OpenStore(big), rows);
  std::printf("filled %lld + 1000 rows in %.1f s (%s)\n", static_cast<long long>(rows),
              std::chrono::duration<double>(Clock::now() - t0).count(), dir.c_str());
  const std::vector<std::pair<std::string, std::string>> pages = {
      {"tasks (summaries)", "/api/tasks"},
      {"kernels page 1", "/api/kernels?limit=50"},
      {"kernels page 1, newest first", "/api/kernels?limit=50&order=desc"},
      {"kernels deep page (offset rows/2)", fmt::format("/api/kernels?limit=50&offset={}", rows / 2)},
      {"kernels of a task, status filter", "/api/kernels?task=task_3&status=value_mismatch&limit=50&order=desc"},
      {"kernels of a task by speedup", "/api/kernels?task=task_3&sort=speedup&order=desc&limit=50"},
      {"jobs page 1, filtered", "/api/jobs?task=task_3&status=COMPLETE&limit=50"},
      {"history poll (after the last 100 ids)", fmt::format("/api/history?task=task_3&after_id={}", rows - 100)},
      {"history of a task (first page, 2000 points)", "/api/history?task=task_3"},
      {"one evaluation", fmt::format("/api/kernels/{}", rows / 2)},
  };
  Running s_small(small), s_big(big);
  std::printf("%-44s %12s %12s %12s %8s\n", "page (first byte)", "1k med ms", "big med ms", "big max ms", "ratio");
  int over = 0;
  for (const auto& [name, path] : pages) {
    std::string small_path = path;
    if (path.find("offset=") != std::string::npos) small_path = "/api/kernels?limit=50&offset=500";
    if (path.find("after_id=") != std::string::npos) small_path = "/api/history?task=task_3&after_id=900";
    if (path.rfind("/api/kernels/", 0) == 0) small_path = "/api/kernels/500";
    Timing a = Measure(s_small.server->port(), small_path), b = Measure(s_big.server->port(), path);
    if (b.max >= 100) ++over;
    std::printf("%-44s %12.2f %12.2f %12.2f %8.1f%s\n", name.c_str(), a.median, b.median, b.max, b.median / a.median,
                b.max >= 100 ? "  OVER 100 ms" : "");
  }
  std::printf("%d page(s) over 100 ms first byte\n", over);
  // First paint in a real browser, when Playwright is at hand (KF_PLAYWRIGHT: the playwright-core directory).
  if (const char* pw = std::getenv("KF_PLAYWRIGHT"); pw != nullptr && *pw != '\0') {
    const std::string cmd = fmt::format("node {}/bench/serve_first_paint.cjs http://127.0.0.1:{}/ task_3",
                                        kf::bench::SourceDir().string(), s_big.server->port());
    std::fflush(stdout);
    if (std::system(cmd.c_str()) != 0) std::printf("first paint: the browser run failed\n");
  } else {
    std::printf("first paint: set KF_PLAYWRIGHT=<build>/serve-e2e/node/node_modules/playwright-core to measure\n");
  }
  if (std::getenv("KF_BENCH_KEEP") == nullptr) fs::remove_all(dir);
  return 0;
}
