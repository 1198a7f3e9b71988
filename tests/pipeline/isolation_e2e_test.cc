// Issue 10, "Deliver as well" and item 8, end to end through `kf run`:
//  * filesystem isolation: a candidate that tries to write the SQLite file, kf's cached builds, ~/.bashrc, a
//    file beside the task (the package directory) and the test tree it runs in — every write fails, the
//    verdict is unaffected and nothing outside the work dir changes (checksums); the same candidate with
//    KF_ISOLATION=off does write (the probe is real) and its verdict says isolation was off. Both harnesses.
//  * SIGTERM / SIGINT to kf: the child trees are killed and the work dirs removed (test phase and build phase).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "hardening_util.hpp"
#include "kernelfoundry/process.hpp"

namespace kf {
namespace {

namespace fs = std::filesystem;
using testing::CopyExample;
using testing::KfRun;
using testing::KfRunResult;
using testing::Q;
using testing::ReadFile;
using testing::TempDir;
using testing::TreeShas;
using testing::WriteFile;


// C++ that appends "#PWNED" to (or creates) every target once, reporting each attempt on stderr.
std::string ProbeCode(const std::vector<std::string>& targets, const fs::path& cache_dir) {
  std::string list;
  for (const auto& t : targets) list += "\"" + t + "\", ";
  // C++14-compatible (torch extensions build with -std=c++14): POSIX readdir, no std::filesystem.
  return "#include <dirent.h>\n#include <cerrno>\n#include <cstdio>\n#include <cstring>\n#include <string>\n"
         "static void kf_probe(const std::string& p) {\n"
         "  FILE* f = std::fopen(p.c_str(), \"a\");\n"
         // The marker is assembled at run time: the candidate's source (stored in the database) must not hold it.
         "  const std::string mark = std::string(\"#PW\") + \"NED\\n\";\n"
         "  if (f) { std::fputs(mark.c_str(), f); std::fclose(f); std::fprintf(stderr, \"kf-probe WROTE %s\\n\", p.c_str()); }\n"
         "  else std::fprintf(stderr, \"kf-probe blocked %s: %s\\n\", p.c_str(), std::strerror(errno));\n"
         "}\n"
         "static void kf_probe_all() {\n"
         "  static bool done = false;\n  if (done) return;\n  done = true;\n"
         "  for (const char* p : {" + list + "}) kf_probe(p);\n"
         "  const std::string dir = \"" + cache_dir.string() + "\";\n"
         "  if (DIR* d = opendir(dir.c_str())) {\n"
         "    while (dirent* e = readdir(d)) if (e->d_name[0] != '.') kf_probe(dir + \"/\" + e->d_name);\n"
         "    closedir(d);\n  }\n"
         "}\n";
}

struct Targets {
  fs::path db, home, pkg, cache;
  std::vector<std::string> list() const {
    return {db.string(), (home / ".bashrc").string(), (pkg / "task.py").string(), (pkg / "config.yaml").string(),
            (pkg / "pwned.txt").string(), (cache / "new-entry.json").string(), "config.yaml" /* the test tree */};
  }
};

// Everything outside the work dirs a candidate might touch, as checksums.
std::map<std::string, std::string> Snapshot(const Targets& t) {
  std::map<std::string, std::string> s;
  for (const auto& [k, v] : TreeShas(t.home)) s["home/" + k] = v;
  for (const auto& [k, v] : TreeShas(t.pkg)) s["pkg/" + k] = v;
  for (const auto& [k, v] : TreeShas(t.cache)) s["cache/" + k] = v;
  return s;
}

void CheckIsolation(const std::string& harness_task, const std::string& candidate_body) {
  TempDir tmp;
  Targets t{tmp.path() / "runs" / "kernels.sqlite3", tmp.path() / "home", tmp.path() / harness_task,
            tmp.path() / "cache" / "builds" / "v1"};
  if (harness_task == "bias_relu") testing::CopyBiasRelu(tmp.path());
  else CopyExample(harness_task, tmp.path());
  WriteFile(t.home / ".bashrc", "export PS1='$ '\n");
  const fs::path cand = tmp.path() / "probe.cpp";
  WriteFile(cand, ProbeCode(t.list(), t.cache) + candidate_body);
  const std::string env = "HOME=" + Q(t.home.string()) + " KF_CACHE_DIR=" + Q((tmp.path() / "cache").string());
  const std::string store = "--db " + Q(t.db.string()) + " --no-reference";

  // Run 1 builds (and stores the build in the cache), run 2 takes it from the cache: the candidate sees an
  // entry to attack in both.
  std::map<std::string, std::string> before = Snapshot(t);
  for (int run = 0; run < 2; ++run) {
    KfRunResult r = KfRun(tmp.path(), t.pkg, cand, env, store);
    ASSERT_TRUE(r.json.is_object()) << Why(r);
    EXPECT_EQ(r.json["status"], "no_reference") << Why(r);
    EXPECT_EQ(r.json["status_detail"].get<std::string>().find("isolation"), std::string::npos);
    std::map<std::string, std::string> after = Snapshot(t);
    if (run == 0) {
      // The only change: the build entry kf itself stored (and its lock file).
      for (const auto& [k, v] : after) {
        if (k.rfind("cache/", 0) == 0 && !before.count(k)) before[k] = v;
      }
    }
    EXPECT_EQ(after, before) << "run " << run;
    EXPECT_FALSE(fs::exists(t.pkg / "pwned.txt"));
    EXPECT_FALSE(fs::exists(t.cache / "new-entry.json"));
    EXPECT_EQ(ReadFile(t.db).find("#PWNED"), std::string::npos);
    const std::string stderr_text = r.json["test_result"]["correctness_result"]["stderr"];
    EXPECT_EQ(stderr_text.find("kf-probe WROTE"), std::string::npos) << stderr_text;
  }
  // Control: the same candidate without isolation does write — and the verdict says so.
  KfRunResult r = KfRun(tmp.path(), t.pkg, cand, env + " KF_ISOLATION=off", "--no-store --no-reference");
  ASSERT_TRUE(r.json.is_object()) << Why(r);
  EXPECT_EQ(r.json["status"], "no_reference") << Why(r);
  EXPECT_NE(r.json["status_detail"].get<std::string>().find(
                "filesystem isolation of build and test children: off (KF_ISOLATION=off)"),
            std::string::npos) << r.json["status_detail"];
  EXPECT_NE(ReadFile(t.home / ".bashrc").find("#PWNED"), std::string::npos);
  EXPECT_NE(ReadFile(t.pkg / "task.py").find("#PWNED"), std::string::npos);
  EXPECT_NE(ReadFile(t.pkg / "config.yaml").find("#PWNED"), std::string::npos);
  EXPECT_TRUE(fs::exists(t.pkg / "pwned.txt"));
  EXPECT_NE(ReadFile(t.db).find("#PWNED"), std::string::npos);
}

bool IsolationAvailable() { return FilesystemIsolationSupport().rfind("landlock", 0) == 0; }

TEST(HardeningIsolationE2E, PytestCandidateCannotWriteOutsideItsRunDir) {
  if (!IsolationAvailable()) GTEST_SKIP() << FilesystemIsolationSupport();
  CheckIsolation("bias_relu",
                 "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {\n"
                 "    kf_probe_all();\n    return torch::relu(x + bias) * scale;\n}\n");
}

TEST(HardeningIsolationE2E, NativeCandidateCannotWriteOutsideItsRunDir) {
  if (!IsolationAvailable()) GTEST_SKIP() << FilesystemIsolationSupport();
  CheckIsolation("omp_reduction",
                 "double kf_sum_squares(const float* x, std::size_t n) {\n  kf_probe_all();\n  double s = 0.0;\n"
                 "  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);\n"
                 "  return s;\n}\n");
}

// ---- item 8: kf stopped by a signal ----

// Starts `kf run` (TMPDIR = tmp) in the background; returns its pid.
pid_t StartKf(const fs::path& tmp, const fs::path& task, const fs::path& cand) {
  testing::UseTestCache();
  std::vector<std::string> env = {"TMPDIR=" + tmp.string(), std::string("KF_CACHE_DIR=") + std::getenv("KF_CACHE_DIR"),
                                  std::string("PATH=") + std::getenv("PATH"), "HOME=" + tmp.string()};
  std::vector<std::string> args = {(testing::BinaryDir() / "kf").string(), "run", task.string(), "--candidate",
                                   cand.string(), "--no-store", "--no-reference"};
  std::vector<char*> envp, argv;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// Waits until a work dir with `prefix` exists in tmp and a process runs inside it.
bool WaitForPhase(const fs::path& tmp, const std::string& prefix, std::chrono::seconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    for (auto& e : fs::directory_iterator(tmp)) {
      if (e.path().filename().string().rfind(prefix, 0) == 0 && !testing::ProcessesUnder(e.path()).empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

TEST(HardeningSignalsE2E, SigtermAndSigintKillTheChildrenAndRemoveTheWorkDirs) {
  TempDir tmp;
  const fs::path work = tmp.path() / "tmp";
  fs::create_directories(work);
  const fs::path task = CopyExample("omp_reduction", tmp.path());
  const fs::path hang = tmp.path() / "hang.cpp";
  WriteFile(hang, "double kf_sum_squares(const float* x, std::size_t n) {\n"
                  "  volatile double s = 0.0;\n  for (;;) s = s + static_cast<double>(x[0]) * static_cast<double>(n);\n}\n");
  const fs::path slow_build = CopyExample("omp_reduction", tmp.path(), "slow_build");
  testing::ReplaceInFile(slow_build / "config.yaml", "  - mkdir -p build\n", "  - sleep 120\n  - mkdir -p build\n");
  struct Case {
    fs::path task;
    int sig;
    const char* phase;
  };
  for (const Case& c : {Case{task, SIGTERM, "kf_test_"}, Case{task, SIGINT, "kf_test_"},
                        Case{slow_build, SIGTERM, "kf_build_"}}) {
    pid_t pid = StartKf(work, c.task, hang);
    ASSERT_TRUE(WaitForPhase(work, c.phase, std::chrono::seconds(400))) << c.phase;
    ASSERT_EQ(kill(pid, c.sig), 0);
    int status = 0;
    pid_t done = 0;
    for (int i = 0; i < 300 && done == 0; ++i) {
      done = waitpid(pid, &status, WNOHANG);
      if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (done == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    ASSERT_EQ(done, pid) << "kf did not stop within 30 s of signal " << c.sig;
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == c.sig) << "status " << status;
    EXPECT_TRUE(testing::LeftoverWorkDirs(work).empty()) << c.phase << " signal " << c.sig;
    for (int i = 0; i < 50 && !testing::ProcessesUnder(work).empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_TRUE(testing::ProcessesUnder(work).empty());
  }
}

}  // namespace
}  // namespace kf
