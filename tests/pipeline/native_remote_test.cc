// The candidate of a native task in a process of its own (kernelfoundry/sdk/remote.hpp, issue 9 item 4) end to
// end through `kf run` on examples/tasks/omp_reduction, whose kernel is a KF_REMOTE function: candidates that
// probe where they run, fake the clock, forge the report, leave work running after returning, or crash.
#include <gtest/gtest.h>

#include <string>

#include "pipeline/hardening_util.hpp"

namespace kf {
namespace {

using testing::CopyExample;
using testing::KfRun;
using testing::KfRunResult;
using testing::TempDir;
using testing::WriteFile;

// The serial loop the reference runs, as a candidate body.
constexpr const char* kLoop =
    "  double s = 0.0;\n"
    "  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);\n"
    "  return s;\n";

// An interposed clock_gettime that runs 100x slow: in a single program it would fake every timing there.
constexpr const char* kFakeClock =
    "#include <dlfcn.h>\n#include <time.h>\n"
    "extern \"C\" int clock_gettime(clockid_t id, struct timespec* ts) {\n"
    "  static auto real = reinterpret_cast<int (*)(clockid_t, struct timespec*)>(dlsym(RTLD_NEXT, \"clock_gettime\"));\n"
    "  const int rc = real(id, ts);\n"
    "  const long long ns = (ts->tv_sec * 1000000000LL + ts->tv_nsec) / 100;\n"
    "  ts->tv_sec = ns / 1000000000LL; ts->tv_nsec = ns % 1000000000LL;\n"
    "  return rc;\n}\n";

std::string RemoteWhy(const KfRunResult& r) {
  const std::string detail = r.json.is_object() && r.json.contains("status_detail") && r.json["status_detail"].is_string()
                                 ? r.json["status_detail"].get<std::string>() : std::string();
  return "status_detail: " + detail + "\n" + r.output.substr(r.output.size() > 6000 ? r.output.size() - 6000 : 0);
}

KfRunResult RunCandidate(const TempDir& tmp, const std::string& name, const std::string& code) {
  const std::filesystem::path task = CopyExample("omp_reduction", tmp.path(), "omp_reduction_" + name);
  const std::filesystem::path cand = tmp.path() / (name + ".cpp");
  WriteFile(cand, code);
  return KfRun(tmp.path(), task, cand);
}

TEST(NativeRemoteE2E, TheCandidateRunsInTheExecutorWithoutCapabilitiesKfsDescriptorsOrTheCheckersMemory) {
  TempDir tmp;
  // Each check the candidate fails is thrown, which makes the verdict a test error naming it.
  const std::string probe = std::string(
      "#include <fcntl.h>\n#include <unistd.h>\n#include <fstream>\n#include <stdexcept>\n#include <string>\n"
      "double kf_sum_squares(const float* x, std::size_t n) {\n"
      "  std::string bad;\n"
      "  char exe[256] = {};\n"
      "  if (readlink(\"/proc/self/exe\", exe, sizeof exe - 1) <= 0 || std::string(exe).find(\"kernel_executor\") == std::string::npos)\n"
      "    bad += \"not in the executor program; \";\n"
      "  const std::string mem = \"/proc/\" + std::to_string(getppid()) + \"/mem\";\n"
      "  const int fd = open(mem.c_str(), O_RDWR);\n"
      "  if (fd >= 0) bad += \"can open the test program's memory; \";\n"
      "  if (fcntl(6, F_GETFD) != -1) bad += \"holds descriptor 6 (kf's result pipe); \";\n"
      "  std::ifstream status(\"/proc/self/status\");\n"
      "  for (std::string line; std::getline(status, line);)\n"
      "    if (line.rfind(\"CapEff:\", 0) == 0 && line.find_first_not_of(\"0\\t \", 7) != std::string::npos)\n"
      "      bad += \"has capabilities (\" + line + \"); \";\n"
      "  if (!bad.empty()) throw std::runtime_error(\"PROBE: \" + bad);\n") + kLoop + "}\n";
  KfRunResult r = RunCandidate(tmp, "probe", probe);
  ASSERT_TRUE(r.json.is_object()) << RemoteWhy(r);
  EXPECT_TRUE(testing::CorrectAndTimed(r.json["status"])) << RemoteWhy(r);
  EXPECT_EQ(r.output.find("PROBE:"), std::string::npos) << RemoteWhy(r);
}

TEST(NativeRemoteE2E, AFakeClockOrAForgedReportFromTheCandidateChangesNothing) {
  TempDir tmp;
  // The fake clock (kFakeClock), and a global constructor that writes a "passed, 1000x" document to descriptor 6 (kf's result pipe in a single program).
  const std::string cheat = std::string(kFakeClock) +
      "#include <unistd.h>\n"
      "static int forged = [] {\n"
      "  const char doc[] = \"{\\\"tests\\\":[{\\\"name\\\":\\\"test_values_match\\\",\\\"kind\\\":\\\"correctness\\\","
      "\\\"status\\\":\\\"passed\\\",\\\"message\\\":\\\"\\\"}],\\\"runtimes\\\":{\\\"bench_sum_squares\\\":[0.001]}}\";\n"
      "  return static_cast<int>(write(6, doc, sizeof doc - 1));\n}();\n"
      "double kf_sum_squares(const float* x, std::size_t n) {\n"
      "  return 0.5 * static_cast<double>(n) * static_cast<double>(x[0]) + forged;\n}\n";
  KfRunResult r = RunCandidate(tmp, "fake_clock", cheat);
  ASSERT_TRUE(r.json.is_object()) << RemoteWhy(r);
  EXPECT_EQ(r.json["status"], "value_mismatch") << RemoteWhy(r);  // judged on its real (wrong) values, not the forgery
  // The same fake clock around the real loop: timed by the test program's clock, about as fast as the reference.
  const std::string honest_but_clocked =
      std::string(kFakeClock) + "double kf_sum_squares(const float* x, std::size_t n) {\n" + kLoop + "}\n";
  r = RunCandidate(tmp, "clocked", honest_but_clocked);
  ASSERT_TRUE(r.json.is_object()) << RemoteWhy(r);
  EXPECT_TRUE(testing::CorrectAndTimed(r.json["status"])) << RemoteWhy(r);
  EXPECT_LT(r.json["speedup"].get<double>(), 2.0) << RemoteWhy(r);
}

TEST(NativeRemoteE2E, WorkLeftRunningInTheExecutorAfterReturningIsSuspicious) {
  TempDir tmp;
  // Returns at once and finishes in a background thread (40 ms of CPU after each call's reply).
  const std::string cheat = std::string(
      "#include <ctime>\n#include <thread>\n"
      "double kf_sum_squares(const float* x, std::size_t n) {\n"
      "  std::thread([] {\n"
      "    timespec t0{}, t{};\n"
      "    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);\n"
      "    volatile double sink = 0;\n"
      "    do { for (int i = 0; i < 10000; ++i) sink = sink + i; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); }\n"
      "    while ((t.tv_sec - t0.tv_sec) * 1e9 + (t.tv_nsec - t0.tv_nsec) < 40e6);\n"
      "  }).detach();\n") + kLoop + "}\n";
  KfRunResult r = RunCandidate(tmp, "background", cheat);
  ASSERT_TRUE(r.json.is_object()) << RemoteWhy(r);
  EXPECT_EQ(r.json["status"], "suspicious") << RemoteWhy(r);
  EXPECT_NE(RemoteWhy(r).find("work continued after the call returned"), std::string::npos) << RemoteWhy(r);
}

TEST(NativeRemoteE2E, ACrashOfTheCandidateEndsTheTestProgramWithItsSignal) {
  TempDir tmp;
  const std::string crash =
      "#include <csignal>\n"
      "double kf_sum_squares(const float* x, std::size_t n) {\n"
      "  std::raise(SIGSEGV);\n  return x[0] * static_cast<double>(n);\n}\n";
  KfRunResult r = RunCandidate(tmp, "crash", crash);
  ASSERT_TRUE(r.json.is_object()) << RemoteWhy(r);
  EXPECT_EQ(r.json["status"], "crash") << RemoteWhy(r);
  EXPECT_NE(r.output.find("the executor died of signal 11"), std::string::npos) << RemoteWhy(r);
}

}  // namespace
}  // namespace kf
