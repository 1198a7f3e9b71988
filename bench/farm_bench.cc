// farm_bench — what the farm costs and gives, on a throwaway RabbitMQ (or $KF_BENCH_BROKER_URL):
//  1. queue-path overhead per job: submit → reply through `kf worker` minus the same task body run locally
//     in this process (build and test jobs of the native omp_reduction task, and an empty test_sleep job),
//     in ms and as a ratio;
//  2. throughput with 1 and 2 workers: jobs/s for a batch submitted at once (test_sleep 0.25 s jobs, which
//     measure the scheduling, and real test jobs, which also compete for this machine's cores), and the
//     2-worker/1-worker ratio.
// Not a test: it prints numbers measured in this run beside their in-run baseline.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "core/files.hpp"
#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/worker.hpp"
#include "services/rabbitmq.hpp"
#include "bench_paths.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::string Slurp(const fs::path& p) { return kf::ReadFileBytes(p).value_or(""); }

struct Worker {
  pid_t pid = -1;
  Worker(const fs::path& kf, const std::string& broker, const std::string& queues, const std::string& node,
         const fs::path& log) {
    const pid_t parent = ::getpid();
    pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a killed bench takes its workers with it
      if (::getppid() != parent) ::_exit(127);
      ::setsid();
      FILE* f = std::freopen(log.c_str(), "a", stderr);
      (void)f;
      ::execl(kf.c_str(), kf.c_str(), "worker", "--broker", broker.c_str(), "-Q", queues.c_str(), "-n", node.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Worker() {
    ::kill(pid, SIGTERM);
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
};

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const fs::path kf = fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "kf";
  std::string broker;
  if (const char* env = std::getenv("KF_BENCH_BROKER_URL")) broker = env;
  std::optional<kf::testing::RabbitMq> node;
  char tmpl[] = "/tmp/kf_farm_bench_XXXXXX";
  const fs::path dir = ::mkdtemp(tmpl);
  if (broker.empty()) {
    const auto t0 = Clock::now();
    node = kf::testing::StartRabbitMq(dir / "rabbitmq");
    broker = node->url();
    std::printf("RabbitMQ started in %.1f s (%s)\n", Ms(t0) / 1000, broker.c_str());
  }
  const std::string tag = fmt::format("bench{}", ::getpid());
  const std::string build_q = "build_custom_task_" + tag, test_q = "test_custom_task_" + tag;

  // The task: examples/tasks/omp_reduction with the fast candidate, queues private to this run.
  const fs::path pkg = dir / "omp";
  fs::copy(kf::bench::SourceDir() / "examples/tasks/omp_reduction", pkg, fs::copy_options::recursive);
  std::string config = Slurp(pkg / "config.yaml");
  for (const char* key : {"language:", "gpu_arch:"}) {
    size_t at = config.find(key);
    config.replace(at, config.find('\n', at) - at, std::string(key) + " " + tag);
  }
  std::ofstream(pkg / "config.yaml") << config;
  const fs::path encoded = dir / "task.json";
  const std::string cmd = fmt::format("{} with-blocks {} --block EVOLVE={} -o {} >/dev/null && {} encode {} -o {}",
                                      kf.string(), pkg.string(),
                                      (kf::bench::SourceDir() / "examples/candidates/omp_reduction/fast.cpp").string(),
                                      (dir / "fast").string(), kf.string(), (dir / "fast").string(), encoded.string());
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "farm_bench: cannot prepare the task (%s)\n", cmd.c_str());
    return 1;
  }
  const kf::Json task = kf::ParseJson(Slurp(encoded), encoded.string());

  const int n = 3;
  // ---- local baseline: the same task bodies in this process ----
  kf::TaskBodyContext ctx;
  ctx.queue = test_q;
  // Warm-up (worker_info, page cache, compiler): one build and test that are not measured.
  kf::Json built = *kf::RunTaskBody(kf::celery::kBuildTaskName, kf::Json::array({task}), kf::Json::object(), ctx).result;
  kf::RunTaskBody(kf::celery::kTestTaskName, kf::Json::array({built}), kf::Json::object(), ctx);
  std::vector<double> local_build, local_test, local_sleep;
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    built = *kf::RunTaskBody(kf::celery::kBuildTaskName, kf::Json::array({task}), kf::Json::object(), ctx).result;
    local_build.push_back(Ms(t0));
    t0 = Clock::now();
    kf::RunTaskBody(kf::celery::kTestTaskName, kf::Json::array({built}), kf::Json::object(), ctx);
    local_test.push_back(Ms(t0));
    t0 = Clock::now();
    kf::RunTaskBody(kf::celery::kSleepTaskName, kf::Json::array({0, "x"}), kf::Json::object(), ctx);
    local_sleep.push_back(Ms(t0));
  }

  // ---- queue path: one kf worker, one job at a time ----
  kf::CeleryClient client(kf::ConnectAmqp(kf::ParseBrokerUrl(broker)));
  auto call = [&](std::string_view name, const kf::Json& args, const std::string& queue) {
    kf::celery::SendOptions so;
    so.queue = queue;
    kf::CallOptions co;
    co.timeout = std::chrono::minutes(5);
    kf::celery::TaskResult r = kf::Call(client, name, args, so, co);
    if (r.status != "SUCCESS") std::fprintf(stderr, "farm_bench: %s\n", r.result.dump().c_str());
  };
  std::vector<double> queue_build, queue_test, queue_sleep;
  {
    Worker w(kf, broker, build_q + "," + test_q, "bench1-" + tag + "@%h", dir / "w1.log");
    // Worker up, job process warm (the same warm-up as the local side).
    call(kf::celery::kBuildTaskName, kf::Json::array({task}), build_q);
    call(kf::celery::kTestTaskName, kf::Json::array({built}), test_q);
    for (int i = 0; i < n; ++i) {
      auto t0 = Clock::now();
      call(kf::celery::kBuildTaskName, kf::Json::array({task}), build_q);
      queue_build.push_back(Ms(t0));
      t0 = Clock::now();
      call(kf::celery::kTestTaskName, kf::Json::array({built}), test_q);
      queue_test.push_back(Ms(t0));
      t0 = Clock::now();
      call(kf::celery::kSleepTaskName, kf::Json::array({0, "x"}), test_q);
      queue_sleep.push_back(Ms(t0));
    }
  }
  std::printf("\nper job (mean of %d), ms          local     queue   overhead   queue/local\n", n);
  auto row = [](const char* name, const std::vector<double>& l, const std::vector<double>& q) {
    std::printf("  %-28s %9.1f %9.1f %9.1f %12.3f\n", name, Mean(l), Mean(q), Mean(q) - Mean(l), Mean(q) / Mean(l));
  };
  row("build_custom_task", local_build, queue_build);
  row("test_custom_task", local_test, queue_test);
  row("test_sleep(0) (transport only)", local_sleep, queue_sleep);

  // ---- throughput: a batch in flight, 1 vs 2 workers ----
  auto batch = [&](int workers, std::string_view name, const kf::Json& args, int jobs) {
    std::vector<std::unique_ptr<Worker>> ws;
    for (int i = 0; i < workers; ++i) {
      ws.push_back(std::make_unique<Worker>(kf, broker, test_q, fmt::format("bench{}x{}-{}@%h", workers, i, tag),
                                            dir / fmt::format("t{}_{}.log", workers, i)));
    }
    for (int i = 0; i < workers; ++i) call(kf::celery::kSleepTaskName, kf::Json::array({0.2, "warm"}), test_q);
    kf::celery::SendOptions so;
    so.queue = test_q;
    std::set<std::string> ids;
    const auto t0 = Clock::now();
    for (int i = 0; i < jobs; ++i) ids.insert(client.Send(name, args, so));
    size_t done = 0;
    while (done < static_cast<size_t>(jobs)) {
      if (auto r = client.WaitAny(ids, std::chrono::minutes(5))) {
        ids.erase(r->task_id);
        ++done;
      } else {
        break;
      }
    }
    return static_cast<double>(done) / (Ms(t0) / 1000);
  };
  const double sleep1 = batch(1, kf::celery::kSleepTaskName, kf::Json::array({0.25, "x"}), 16);
  const double sleep2 = batch(2, kf::celery::kSleepTaskName, kf::Json::array({0.25, "x"}), 16);
  const double test1 = batch(1, kf::celery::kTestTaskName, kf::Json::array({built}), 8);
  const double test2 = batch(2, kf::celery::kTestTaskName, kf::Json::array({built}), 8);
  std::printf("\nthroughput, jobs/s                 1 worker  2 workers   2/1\n");
  std::printf("  test_sleep(0.25) x16           %9.2f %10.2f %6.2f\n", sleep1, sleep2, sleep2 / sleep1);
  std::printf("  test_custom_task x8            %9.2f %10.2f %6.2f   (%u cores here)\n", test1, test2, test2 / test1,
              std::thread::hardware_concurrency());
  std::printf("  ideal for test_sleep: %.2f jobs/s per worker (0.25 s each)\n", 1 / 0.25);

  if (node) kf::testing::StopRabbitMq(*node);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
