// The farm end to end on a real RabbitMQ (one throwaway node per test run) with real `kf worker` processes,
// a stock Python Celery client and a Python Celery worker (Debian python3-celery), on the native
// omp_reduction task with private queue names per test:
//  * a Python Celery client configured like the reference finds kf worker (inspect().active_queues()) and
//    gets build/test/test_sleep results in the reference's shapes;
//  * `kf run --broker` gets correct verdicts from a Python Celery worker that runs kf inside (text-only
//    results, classified as the reference's are);
//  * SIGKILL of a worker in the middle of a test: its job tree dies, a second worker completes the
//    redelivered job, one COMPLETE job;
//  * a poison task (the worker running its build is killed, every time) fails with WorkerLostError after 3
//    deliveries and the farm keeps serving;
//  * Ctrl-C of `kf run --broker` revokes its test (terminate): the worker stops the job, the verdict is
//    canceled;
//  * (Slow) 2 workers × mixed candidates through `kf submit` (fast / wrong / crashing / hanging): one verdict
//    each, none lost or duplicated. 3 per kind (12) by default; KF_FARM_CANDIDATES_PER_KIND=10 runs the issue's
//    40 (about 13 min on the 2-core machine).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/store.hpp"
#include "services/rabbitmq.hpp"
#include "test_util.hpp"
#include "worker/farm_util.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using namespace kf::testing;
using Clock = std::chrono::steady_clock;

class FarmE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = TestBroker();
    if (broker_.empty()) GTEST_SKIP() << "rabbitmq-server is not installed";
    if (!fs::exists(KfBin())) GTEST_SKIP() << "kf is not built";
    tag_ = FarmTag();
    build_q_ = "build_custom_task_" + tag_;
    test_q_ = "test_custom_task_" + tag_;
    task_ = MakeOmpTask(dir_.path(), tag_);
  }
  void TearDown() override {
    // Leave nothing behind on the shared broker.
    if (broker_.empty()) return;
    try {
      auto b = ConnectAmqp(ParseBrokerUrl(broker_));
      b->DeleteQueue(build_q_);
      b->DeleteQueue(test_q_);
    } catch (const Error&) {
    }
  }
  fs::path WriteCandidate(const std::string& name, const std::string& text) {
    fs::path p = dir_.path() / name;
    std::ofstream(p) << text;
    return p;
  }
  // Waits until `node` answers pings on the broker.
  bool WaitForNode(const std::string& node, double seconds) {
    CeleryClient client(ConnectAmqp(ParseBrokerUrl(broker_)));
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < deadline) {
      if (client.Ping(node, std::chrono::milliseconds(500))) return true;
    }
    return false;
  }
  std::string KfRun(const fs::path& task, const fs::path& candidate, const fs::path& db, const fs::path& json,
                    int* rc) {
    auto [status, out] = RunShell(fmt::format("{} run {} --candidate {} --broker '{}' --db {} --json {} 2>&1",
                                              KfBin().string(), task.string(), candidate.string(), broker_,
                                              db.string(), json.string()));
    *rc = status;
    return out;
  }

  TempDir dir_;
  std::string broker_, tag_, build_q_, test_q_;
  fs::path task_;
};

TEST_F(FarmE2E, PythonCeleryClientFindsAndUsesKfWorker) {
  if (!PythonCeleryAvailable()) GTEST_SKIP() << "python3-celery / python3-msgpack not installed";
  const std::string node = "kfe2e-" + tag_ + "@%h";
  const fs::path db = dir_.path() / "worker.sqlite3";
  Proc worker = StartKfWorker(broker_, {build_q_, test_q_}, node, dir_.path(), {"--db", db.string()});
  ASSERT_TRUE(worker.WaitForLog("consuming", 30)) << worker.Log();
  auto [enc_status, enc_out] =
      RunShell(KfBin().string() + " encode " + task_.string() + " -o " + (dir_.path() / "task.json").string());
  ASSERT_EQ(enc_status, 0) << enc_out;
  auto [status, out] = RunShell(fmt::format("/usr/bin/python3 {} '{}' {} {} 2>&1",
                                            (SourceDir() / "tests/worker/celery_reference_client.py").string(),
                                            broker_, (dir_.path() / "task.json").string(),
                                            (dir_.path() / "report.json").string()));
  ASSERT_EQ(status, 0) << out << "\n--- worker log ---\n" << worker.Log();
  Json report = ParseJson(ReadFile(dir_.path() / "report.json"), "report.json");
  // Discovery: the reference's TaskRunner.init check passed inside the script; the node answered in time (a
  // reply after inspect's timeout is not collected, so `found` below says it). inspect() without a reply limit
  // always waits its whole timeout; its duration only shows that it did not hang: a bound with room for a
  // loaded machine (a fixed timeout + 1 s measured 6.1 s on 2 busy cores).
  EXPECT_LT(report["inspect_seconds"].get<double>(), report["inspect_timeout"].get<double>() + 10.0);
  bool found = false;
  for (const Json& n : report["nodes"]) found = found || n.get<std::string>().rfind("kfe2e-" + tag_ + "@", 0) == 0;
  EXPECT_TRUE(found) << report.dump(2);
  // Build: the encoded Task back, the test program among its artifacts.
  EXPECT_EQ(report["build_returncode"], 0) << report.dump(2);
  EXPECT_EQ(report["artifacts"], Json::array({"build/kernel_executor", "build/test_kernel"}));  // sorted
  // Test: {variant: TestResult} with both variants passing and runtimes measured.
  const Json& t = report["tests"][tag_];
  EXPECT_EQ(t["custom"]["correctness_returncode"], 0) << report.dump(2);
  EXPECT_EQ(t["custom"]["performance_returncode"], 0);
  EXPECT_TRUE(t["custom"]["runtimes"].contains("bench_sum_squares")) << report.dump(2);
  EXPECT_EQ(t["reference"]["correctness_returncode"], 0);
  EXPECT_EQ(report["sleep"], "hello from python");
  EXPECT_EQ(report["sleep_json"], "json body");
  // A task that does not decode comes back as the exception Celery raises.
  EXPECT_NE(report["bad_task_error"].get<std::string>().find("ValueError"), std::string::npos) << report.dump(2);
  EXPECT_NE(report["bad_task_error"].get<std::string>().find("task_data"), std::string::npos) << report.dump(2);

  worker.Signal(SIGTERM);
  int ws = worker.Wait(30);
  ASSERT_TRUE(WIFEXITED(ws)) << worker.Log();
  EXPECT_EQ(WEXITSTATUS(ws), 0);
  // Every job recorded: build, test and the two sleeps COMPLETE; the bad build FAIL.
  auto store = OpenStore(db.string());
  std::multiset<std::string> statuses;
  for (int id = 1; id <= 5; ++id) statuses.insert(store->GetJob(id)["status"].get<std::string>());
  EXPECT_EQ(statuses, (std::multiset<std::string>{"COMPLETE", "COMPLETE", "COMPLETE", "COMPLETE", "FAIL"}));
  testing::ExpectError(ErrorKind::kNotFound, [&] { store->GetJob(6); });
  // The process outputs in the reference's job_logs format: the log's name in message, the text in extra.
  std::multiset<std::string> raw_names;
  for (int id = 1; id <= 5; ++id) {
    for (const Json& log : store->ListJobLogs(id)) {
      if (log["level"] != "RAW") continue;
      raw_names.insert(log["message"].get<std::string>());
      EXPECT_EQ(log["extra"]["log"].get<std::string>().rfind("Return code: ", 0), 0u) << log.dump();
    }
  }
  EXPECT_EQ(raw_names.count("build"), 1u) << Json(std::vector<std::string>(raw_names.begin(), raw_names.end())).dump();
  EXPECT_EQ(raw_names.count("test_custom_correctness"), 1u);
  EXPECT_EQ(raw_names.count("test_reference_correctness"), 1u);
}

TEST_F(FarmE2E, KfRunGetsVerdictsFromAPythonCeleryWorker) {
  if (!PythonCeleryAvailable()) GTEST_SKIP() << "python3-celery / python3-msgpack not installed";
  const std::string node = "standin-" + tag_ + "@localhost";
  Proc worker({"/usr/bin/python3", (SourceDir() / "tests/worker/celery_standin_worker.py").string(), broker_,
               build_q_ + "," + test_q_, node},
              dir_.path() / "standin.log", {{"KF_BIN", KfBin().string()}});
  ASSERT_TRUE(WaitForNode(node, 60)) << worker.Log();
  int rc = -1;
  std::string out = KfRun(task_, WriteCandidate("fast.cpp", OmpCandidate("fast")), dir_.path() / "client.sqlite3",
                          dir_.path() / "fast.json", &rc);
  EXPECT_EQ(rc, 0) << out << "\n--- worker log ---\n" << worker.Log();
  Json fast = ParseJson(ReadFile(dir_.path() / "fast.json"), "fast.json");
  EXPECT_TRUE(testing::CorrectAndTimed(fast["status"])) << fast.dump(2).substr(0, 4000);
  EXPECT_GT(fast["speedup"].get<double>(), 0);
  EXPECT_NE(out.find("kf: farm: build: sent to " + build_q_), std::string::npos) << out;

  out = KfRun(task_, WriteCandidate("wrong.cpp", OmpCandidate("wrong")), dir_.path() / "client.sqlite3",
              dir_.path() / "wrong.json", &rc);
  EXPECT_EQ(rc, 1) << out;
  Json wrong = ParseJson(ReadFile(dir_.path() / "wrong.json"), "wrong.json");
  EXPECT_EQ(wrong["status"], "value_mismatch") << wrong["status_detail"];

  auto store = OpenStore((dir_.path() / "client.sqlite3").string());
  EXPECT_EQ(store->GetJob(1)["status"], "COMPLETE");
  EXPECT_EQ(store->ListKernels({}).size(), 2u);
  worker.Signal(SIGTERM, /*group=*/true);
  if (worker.Wait(20) < 0) worker.Signal(SIGKILL, true);
}

TEST_F(FarmE2E, SigkillMidTestRedeliversToASecondWorker) {
  const fs::path db = dir_.path() / "workers.sqlite3";
  const fs::path work_a = dir_.path() / "work_a";
  fs::create_directories(work_a);
  Proc a = StartKfWorker(broker_, {build_q_, test_q_}, "a-" + tag_ + "@%h", dir_.path(),
                         {"--db", db.string(), "--work-root", work_a.string()});
  ASSERT_TRUE(a.WaitForLog("consuming", 30)) << a.Log();
  const fs::path cand = WriteCandidate("slow.cpp", OmpCandidate("slow", 4000));
  Proc client({KfBin().string(), "run", task_.string(), "--candidate", cand.string(), "--broker", broker_, "--db",
               (dir_.path() / "client.sqlite3").string(), "--json", (dir_.path() / "out.json").string()},
              dir_.path() / "client.log");
  ASSERT_TRUE(a.WaitForLog("from " + test_q_ + " (delivery 1) started", 180)) << a.Log() << client.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // inside the test run
  std::vector<int> job_processes = PidsWorkingUnder(work_a);
  ASSERT_FALSE(job_processes.empty()) << "the test should be running under " << work_a;
  a.Signal(SIGKILL);
  ASSERT_GE(a.Wait(10), 0);
  // The job's whole process tree dies with the worker.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!PidsWorkingUnder(work_a).empty() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(PidsWorkingUnder(work_a).empty()) << "job processes outlived the killed worker";

  Proc b = StartKfWorker(broker_, {build_q_, test_q_}, "b-" + tag_ + "@%h", dir_.path(), {"--db", db.string()});
  const int rc = client.Wait(240);
  ASSERT_GE(rc, 0) << client.Log() << b.Log();
  EXPECT_EQ(WEXITSTATUS(rc), 0) << client.Log() << "\n--- b ---\n" << b.Log();
  EXPECT_NE(b.Log().find("(delivery 2) SUCCESS"), std::string::npos) << b.Log();
  Json out = ParseJson(ReadFile(dir_.path() / "out.json"), "out.json");
  EXPECT_TRUE(testing::CorrectAndTimed(out["status"])) << out["status"];
  // The client recorded one job, COMPLETE.
  auto client_db = OpenStore((dir_.path() / "client.sqlite3").string());
  EXPECT_EQ(client_db->GetJob(1)["status"], "COMPLETE");
  testing::ExpectError(ErrorKind::kNotFound, [&] { client_db->GetJob(2); });
  // The workers recorded the build (by a) and one test (by b): two COMPLETE jobs, nothing else.
  b.Signal(SIGTERM);
  b.Wait(30);
  auto worker_db = OpenStore(db.string());
  EXPECT_EQ(worker_db->GetJob(1)["status"], "COMPLETE");
  EXPECT_EQ(worker_db->GetJob(2)["status"], "COMPLETE");
  testing::ExpectError(ErrorKind::kNotFound, [&] { worker_db->GetJob(3); });
}

// Issue 25: a farm worker's jobs run their candidates sandboxed exactly like a local run (the same process
// runner): the candidate (in the task's executor) finds itself unprivileged, filtered and refused the worker's
// database, cache and home; it reports each finding and computes a wrong sum when one does not hold.
TEST_F(FarmE2E, KfWorkerJobsRunTheirCandidatesSandboxed) {
  const fs::path db = dir_.path() / "workers.sqlite3";
  const fs::path home = std::getenv("HOME") ? fs::path(std::getenv("HOME")) : fs::path("/root");
  const fs::path cache = std::getenv("KF_CACHE_DIR") ? fs::path(std::getenv("KF_CACHE_DIR")) : home / ".cache";
  Proc w = StartKfWorker(broker_, {build_q_, test_q_}, "sb-" + tag_ + "@%h", dir_.path(), {"--db", db.string()});
  ASSERT_TRUE(w.WaitForLog("consuming", 30)) << w.Log();
  const std::string root = ::geteuid() == 0 ? "true" : "false";
  const std::string probe =
      "#include <fcntl.h>\n#include <unistd.h>\n#include <cerrno>\n#include <cstdio>\n#include <fstream>\n"
      "#include <string>\n"
      "static int kf_check(const char* what, bool ok) {\n"
      "  std::fprintf(stderr, \"kf-probe %s: %s\\n\", what, ok ? \"ok\" : \"FAILED\");\n  return ok ? 0 : 1;\n}\n"
      "static bool kf_refused(const char* p) {\n  const int fd = open(p, O_RDONLY);\n"
      "  if (fd >= 0) close(fd);\n  return fd < 0 && (errno == EACCES || errno == EPERM);\n}\n"
      "static const int kf_bad = [] {\n  std::string cap, sec;\n  std::ifstream st(\"/proc/self/status\");\n"
      "  for (std::string l; std::getline(st, l);) {\n"
      "    if (l.rfind(\"CapEff:\", 0) == 0) cap = l.substr(8);\n    if (l.rfind(\"Seccomp:\", 0) == 0) sec = l.substr(9);\n"
      "  }\n"
      "  return kf_check(\"uid\", !" + root + " || geteuid() != 0) + kf_check(\"CapEff\", cap == \"0000000000000000\") +\n"
      "         kf_check(\"Seccomp\", sec == \"2\") + kf_check(\"shadow\", kf_refused(\"/etc/shadow\")) +\n"
      "         kf_check(\"database\", kf_refused(\"" + db.string() + "\")) +\n"
      "         kf_check(\"cache\", kf_refused(\"" + cache.string() + "\")) +\n"
      "         kf_check(\"home\", kf_refused(\"" + home.string() + "\"));\n}();\n"
      "double kf_sum_squares(const float* x, std::size_t n) {\n  double s = 0.0;\n"
      "  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);\n"
      "  return s + kf_bad;\n}\n";
  int rc = -1;
  const std::string out = KfRun(task_, WriteCandidate("probe.cpp", probe), dir_.path() / "client.sqlite3",
                                dir_.path() / "probe.json", &rc);
  EXPECT_EQ(rc, 0) << out << "\n--- worker log ---\n" << w.Log();
  const Json j = ParseJson(ReadFile(dir_.path() / "probe.json"), "probe.json");
  EXPECT_TRUE(testing::CorrectAndTimed(j["status"])) << j.dump(2).substr(0, 6000);
  const std::string err = j["test_result"]["correctness_result"]["stderr"].get<std::string>();
  for (const char* check : {"uid", "CapEff", "Seccomp", "shadow", "database", "cache", "home"}) {
    EXPECT_NE(err.find(std::string("kf-probe ") + check + ": ok"), std::string::npos) << check << "\n" << err;
  }
  EXPECT_EQ(err.find("FAILED"), std::string::npos) << err;
  w.Signal(SIGTERM);
  w.Wait(30);
}

TEST_F(FarmE2E, CtrlCOfKfRunRevokesItsTestAndTheWorkerStopsTheJob) {
  const fs::path work = dir_.path() / "work_cancel";
  fs::create_directories(work);
  Proc worker = StartKfWorker(broker_, {build_q_, test_q_}, "cancel-" + tag_ + "@%h", dir_.path(),
                              {"--work-root", work.string()});
  ASSERT_TRUE(worker.WaitForLog("consuming", 30)) << worker.Log();
  const fs::path cand = WriteCandidate("hang.cpp", OmpCandidate("hang"));
  Proc client({KfBin().string(), "run", task_.string(), "--candidate", cand.string(), "--broker", broker_, "--db",
               (dir_.path() / "client.sqlite3").string(), "--json", (dir_.path() / "out.json").string()},
              dir_.path() / "client.log");
  ASSERT_TRUE(worker.WaitForLog("from " + test_q_ + " (delivery 1) started", 180)) << worker.Log() << client.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the hanging test runs
  ASSERT_FALSE(PidsWorkingUnder(work).empty());
  const auto t0 = Clock::now();
  client.Signal(SIGINT);
  const int rc = client.Wait(30);
  ASSERT_GE(rc, 0) << client.Log();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10)) << client.Log();
  EXPECT_EQ(WEXITSTATUS(rc), 1) << client.Log();
  Json out = ParseJson(ReadFile(dir_.path() / "out.json"), "out.json");
  EXPECT_EQ(out["status"], "canceled") << out["status_detail"];
  EXPECT_NE(client.Log().find("revoked 1 task id(s)"), std::string::npos) << client.Log();
  // The worker stops the job (its process tree is gone long before the 20 s test timeout) and goes on.
  ASSERT_TRUE(worker.WaitForLog("REVOKED", 15)) << worker.Log();
  EXPECT_NE(worker.Log().find("revoked with terminate; asked the job to stop"), std::string::npos) << worker.Log();
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!PidsWorkingUnder(work).empty() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(PidsWorkingUnder(work).empty()) << "the canceled test still runs";
  int rc2 = -1;
  std::string again = KfRun(task_, WriteCandidate("fast.cpp", OmpCandidate("fast")), dir_.path() / "client.sqlite3",
                            dir_.path() / "after.json", &rc2);
  EXPECT_EQ(rc2, 0) << again;
  worker.Signal(SIGTERM);
  worker.Wait(30);
}

// The argv of a live process (empty when it is gone or a zombie) and its parent's pid (0 when unknown).
std::vector<std::string> ArgsOf(int pid) {
  std::vector<std::string> args;
  if (!PidAlive(pid)) return args;
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
  return args;
}
int ParentOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  char state = 0;
  int ppid = 0;
  rest >> state >> ppid;
  return ppid;
}
// True when a live process whose argv holds `script` and `token` descends from `ancestor`.
bool DescendantRuns(int ancestor, const std::string& script, const std::string& token) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const std::vector<std::string> args = ArgsOf(std::stoi(name));
    if (std::find(args.begin(), args.end(), token) == args.end()) continue;
    if (std::none_of(args.begin(), args.end(), [&](const std::string& a) { return a.ends_with(script); })) continue;
    for (int pid = std::stoi(name); pid > 1; pid = ParentOf(pid)) {
      if (pid == ancestor) return true;
    }
  }
  return false;
}

TEST_F(FarmE2E, PoisonTaskFailsAfterMaxDeliveriesAndTheFarmKeepsServing) {
  // A task whose build kills the worker that runs it, every time (a job that crashes its worker, or gets it
  // OOM-killed). The build cannot send the signal itself: build children are isolated (issue 10) and
  // Landlock's signal scope (ABI >= 6) keeps them from signaling anything outside their sandbox. So the
  // build announces itself (poison_wait.py with this test's tag in its argv) and waits until its worker is
  // gone; the supervisor below SIGKILLs the worker it finds running that build.
  const fs::path poison = dir_.path() / ("poison_" + tag_);
  fs::copy(task_, poison, fs::copy_options::recursive);
  std::ofstream(poison / "poison_wait.py") <<
      "import os, sys, time\n"
      "def args(pid):\n"
      "    return open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')\n"
      "def alive(pid):\n"
      "    try:\n"
      "        return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] != 'Z'\n"
      "    except OSError:\n"
      "        return False\n"
      "pid = os.getppid()\n"
      "while pid > 1 and not (b'worker' in args(pid) and b'-Q' in args(pid)):\n"
      "    pid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\n"
      "deadline = time.time() + 120\n"
      "while pid > 1 and alive(pid) and time.time() < deadline:\n"
      "    time.sleep(0.05)\n"
      "sys.exit(1)\n";
  {
    std::string config = ReadFile(poison / "config.yaml");
    const size_t at = config.find("build:\n");
    ASSERT_NE(at, std::string::npos);
    config.insert(at + 7, "  - /usr/bin/python3 poison_wait.py " + tag_ + "\n");
    std::ofstream(poison / "config.yaml") << config;
  }
  // A supervisor restarts the worker whenever it dies (as systemd would), and kills the worker that runs the
  // poison build.
  std::atomic<bool> stop{false};
  std::atomic<int> starts{0};
  std::mutex mu;
  std::unique_ptr<Proc> current;
  std::thread supervisor([&] {
    while (!stop) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!current || !current->Running()) {
          current = std::make_unique<Proc>(StartKfWorker(broker_, {build_q_, test_q_}, fmt::format("p{}-{}@%h", starts.load(), tag_),
                                                         dir_.path(), {"--max-deliveries", "3"}));
          ++starts;
        } else if (DescendantRuns(current->pid(), "poison_wait.py", tag_)) {
          current->Signal(SIGKILL);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  int rc = -1;
  std::string out = KfRun(poison, WriteCandidate("fast.cpp", OmpCandidate("fast")), dir_.path() / "client.sqlite3",
                          dir_.path() / "poison.json", &rc);
  EXPECT_EQ(rc, 1) << out;
  Json verdict = ParseJson(ReadFile(dir_.path() / "poison.json"), "poison.json");
  EXPECT_EQ(verdict["status"], "build_error") << verdict["status_detail"];
  const std::string message = verdict["build_result"]["result"]["message"].get<std::string>();
  EXPECT_NE(message.find("WorkerLostError"), std::string::npos) << message;
  EXPECT_NE(message.find("each of 3 deliveries"), std::string::npos) << message;
  EXPECT_EQ(starts.load(), 4) << "three workers killed by the poison build, the fourth answered";
  // The farm keeps serving.
  out = KfRun(task_, WriteCandidate("fast.cpp", OmpCandidate("fast")), dir_.path() / "client.sqlite3",
              dir_.path() / "after.json", &rc);
  EXPECT_EQ(rc, 0) << out;
  stop = true;
  supervisor.join();
  std::lock_guard<std::mutex> lock(mu);
  current->Signal(SIGTERM);
  current->Wait(30);
}

TEST_F(FarmE2E, LongJobKeepsHeartbeatsAnswersControlAndFinishesOnSigterm) {
  // Heartbeat 1 s: RabbitMQ closes a connection that stays silent for about two intervals, so the job's
  // connection survives 8 s only if the worker keeps servicing it while the job runs.
  const std::string node = "hb-" + tag_ + "@localhost";
  Proc worker = StartKfWorker(broker_, {test_q_}, node, dir_.path(), {"--heartbeat", "1"});
  ASSERT_TRUE(worker.WaitForLog("consuming", 30)) << worker.Log();
  CeleryClient client(ConnectAmqp(ParseBrokerUrl(broker_)));
  celery::SendOptions so;
  so.queue = test_q_;
  const std::string id = client.Send(celery::kSleepTaskName, Json::array({8, "done"}), so);
  const auto t0 = Clock::now();
  while (client.Started(id).is_null() && Clock::now() - t0 < std::chrono::seconds(30)) {
    client.WaitAny({id}, std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(client.Started(id).is_null()) << worker.Log();
  double worst_ms = 0;
  for (int i = 0; i < 4; ++i) {
    const auto p0 = Clock::now();
    EXPECT_TRUE(client.Ping(node, std::chrono::milliseconds(1000))) << "no ping answer mid-job";
    worst_ms = std::max(worst_ms, std::chrono::duration<double, std::milli>(Clock::now() - p0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_LT(worst_ms, 1000);
  std::printf("ping round trip during a job: worst %.0f ms\n", worst_ms);
  // `kf workers` shows the node, its queue and the running task.
  auto [workers_rc, workers_out] = RunShell(KfBin().string() + " workers --timeout 0.8 --json --broker '" + broker_ + "'");
  EXPECT_EQ(workers_rc, 0) << workers_out;
  Json listed = ParseJson(workers_out, "kf workers --json");
  bool seen = false;
  for (const Json& w : listed) {
    if (w["node"] != node) continue;
    seen = true;
    EXPECT_EQ(w["queues"], Json::array({test_q_}));
    ASSERT_EQ(w["active"].size(), 1u);
    EXPECT_EQ(w["active"][0]["id"], id);
  }
  EXPECT_TRUE(seen) << workers_out;
  auto answers = client.Broadcast({"active_queues", "active"}, std::chrono::milliseconds(800));
  ASSERT_TRUE(answers["active_queues"].count(node));
  EXPECT_EQ(answers["active_queues"][node][0]["name"], test_q_);
  ASSERT_TRUE(answers["active"].count(node));
  EXPECT_EQ(answers["active"][node][0]["id"], id);
  worker.Signal(SIGTERM);  // graceful: the job (8 s) finishes within the 30 s grace
  std::optional<celery::TaskResult> r = client.WaitAny({id}, std::chrono::seconds(30));
  ASSERT_TRUE(r) << worker.Log();
  EXPECT_EQ(r->status, "SUCCESS");
  EXPECT_EQ(r->result, "done");
  const int ws = worker.Wait(30);
  ASSERT_TRUE(WIFEXITED(ws)) << worker.Log();
  EXPECT_EQ(WEXITSTATUS(ws), 0);
  EXPECT_EQ(worker.Log().find("connection lost"), std::string::npos) << worker.Log();
}

TEST_F(FarmE2E, WorkerReconnectsAfterTheNetworkDropsAndPublishesTheRunningJobsResult) {
  const BrokerUrl direct = ParseBrokerUrl(broker_);
  TcpProxy proxy(direct.port);
  const std::string via_proxy = fmt::format("amqp://guest:guest@127.0.0.1:{}//", proxy.port());
  const std::string node = "net-" + tag_ + "@localhost";
  Proc worker = StartKfWorker(via_proxy, {test_q_}, node, dir_.path());
  ASSERT_TRUE(worker.WaitForLog("consuming", 30)) << worker.Log();
  CeleryClient client(ConnectAmqp(direct));
  celery::SendOptions so;
  so.queue = test_q_;
  const std::string id = client.Send(celery::kSleepTaskName, Json::array({3, "finished offline"}), so);
  const auto t0 = Clock::now();
  while (client.Started(id).is_null() && Clock::now() - t0 < std::chrono::seconds(30)) {
    client.WaitAny({id}, std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(client.Started(id).is_null()) << worker.Log();
  proxy.CutAll();  // RabbitMQ sees the connection close and requeues the unacknowledged message
  std::optional<celery::TaskResult> r = client.WaitAny({id}, std::chrono::seconds(60));
  ASSERT_TRUE(r) << worker.Log();
  EXPECT_EQ(r->status, "SUCCESS");
  EXPECT_EQ(r->result, "finished offline");
  EXPECT_TRUE(worker.WaitForLog("dropping its redelivery", 20)) << worker.Log();
  EXPECT_NE(worker.Log().find("published the reply of a job that finished while disconnected"), std::string::npos);
  // Still serving, and the redelivered copy did not run again.
  const std::string next = client.Send(celery::kSleepTaskName, Json::array({0, "next"}), so);
  r = client.WaitAny({next}, std::chrono::seconds(30));
  ASSERT_TRUE(r) << worker.Log();
  EXPECT_EQ(r->result, "next");
  const std::string log = worker.Log();
  size_t runs = 0;
  for (size_t at = log.find(id + " from"); at != std::string::npos; at = log.find(id + " from", at + 1)) ++runs;
  EXPECT_EQ(runs, 1u) << log;
  worker.Signal(SIGTERM);
  worker.Wait(30);
}

TEST_F(FarmE2E, SlowTwoWorkersMixedCandidates) {
  const char* per_kind_env = std::getenv("KF_FARM_CANDIDATES_PER_KIND");
  // One of each kind by default: 4 jobs submitted at once over two workers of one build and one test slot each
  // (prefetch 1 per slot), so both take some; 2 of each cost CI 200 s of one core, KF_FARM_CANDIDATES_PER_KIND
  // sets more.
  const int per_kind = per_kind_env && std::atoi(per_kind_env) > 0 ? std::atoi(per_kind_env) : 1;
  const size_t total = 4 * static_cast<size_t>(per_kind);
  task_ = MakeOmpTask(dir_.path() / "short", tag_, /*test_timeout=*/8);
  const fs::path db = dir_.path() / "workers.sqlite3";
  Proc a = StartKfWorker(broker_, {build_q_, test_q_}, "a-" + tag_ + "@%h", dir_.path(), {"--db", db.string()});
  Proc b = StartKfWorker(broker_, {build_q_, test_q_}, "b-" + tag_ + "@%h", dir_.path(), {"--db", db.string()});
  const fs::path cands = dir_.path() / "candidates";
  fs::create_directories(cands);
  const std::vector<std::string> kinds = {"fast", "wrong", "crash", "hang"};
  for (int i = 0; i < per_kind; ++i) {
    for (const std::string& k : kinds) {
      // Each file differs (a comment), so no two jobs are the same task.
      std::ofstream(cands / fmt::format("{}_{:02d}.cpp", k, i)) << "// candidate " << i << "\n" << OmpCandidate(k);
    }
  }
  const fs::path client_db = dir_.path() / "client.sqlite3";
  auto [status, out] = RunShell(fmt::format("{} submit {} --candidates {} --broker '{}' --parallel 4 --db {} --json {} 2>&1",
                                            KfBin().string(), task_.string(), cands.string(), broker_,
                                            client_db.string(), (dir_.path() / "submit.json").string()));
  EXPECT_EQ(status, 0) << out << "\n--- a ---\n" << a.Log() << "\n--- b ---\n" << b.Log();
  Json doc = ParseJson(ReadFile(dir_.path() / "submit.json"), "submit.json");
  ASSERT_EQ(doc.size(), total);
  const std::map<std::string, std::string> expected = {
      {"fast", "correct"}, {"wrong", "value_mismatch"}, {"crash", "crash"}, {"hang", "test_timeout"}};
  std::set<std::string> candidates;
  for (const Json& e : doc) {
    const std::string name = fs::path(e["candidate"].get<std::string>()).filename().string();
    candidates.insert(name);
    EXPECT_TRUE(e["evaluated"].get<bool>()) << e.dump();
    const std::string kind = name.substr(0, name.find('_'));
    if (kind == "fast") {
      // Correct (perf 5); on a loaded machine a timing run may miss its limit ("no_measurement").
      EXPECT_TRUE(e["correct"].get<bool>()) << e.dump();
    } else {
      EXPECT_EQ(e["status"], expected.at(kind)) << e.dump();
    }
  }
  EXPECT_EQ(candidates.size(), total);
  EXPECT_NE(out.find(fmt::format("done {0}/{0}", total)), std::string::npos) << out;
  // The client stored one verdict per candidate, one job each.
  auto store = OpenStore(client_db.string());
  std::vector<Json> kernels = store->ListKernels({});
  EXPECT_EQ(kernels.size(), total);
  std::set<int64_t> jobs;
  for (const Json& k : kernels) {
    jobs.insert(k["job_id"].get<int64_t>());
    EXPECT_EQ(k["job_status"], "COMPLETE");
  }
  EXPECT_EQ(jobs.size(), total);
  // Both workers took jobs; together they ran one build and one test per candidate, none twice.
  a.Signal(SIGTERM);
  b.Signal(SIGTERM);
  a.Wait(30);
  b.Wait(30);
  EXPECT_NE(a.Log().find("SUCCESS"), std::string::npos);
  EXPECT_NE(b.Log().find("SUCCESS"), std::string::npos);
  auto workers = OpenStore(db.string());
  int complete = 0;
  std::string recorded;  // what each job was, for the failure message
  for (int id = 1;; ++id) {
    try {
      Json job = workers->GetJob(id);
      complete += job["status"] == "COMPLETE" ? 1 : 0;
      const Json config = job["config"];
      job.erase("config");
      recorded += job.dump().substr(0, 600) + " test_custom=" + config.value("test_custom", Json()).dump() +
                  " test_reference=" + config.value("test_reference", Json()).dump() + "\n";
    } catch (const Error&) {
      EXPECT_EQ(static_cast<size_t>(id - 1), 2 * total) << "jobs recorded by the workers:\n" << recorded
                                                         << "the client said:\n" << out;
      break;
    }
  }
  EXPECT_EQ(static_cast<size_t>(complete), 2 * total);
}

}  // namespace
}  // namespace kf
