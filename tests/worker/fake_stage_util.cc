// See fake_stage_util.hpp.
#include "worker/fake_stage_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "fake_task.hpp"

namespace kf::testing {

namespace {

long long NowUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

// Sleeps `ms` unless stopped; returns true when stopped.
bool SleepUnlessStopped(int ms, const std::stop_token& stop) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (stop.stop_requested()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return stop.stop_requested();
}

void Append(const std::filesystem::path& record, const std::string& line) {
  if (record.empty()) return;
  const int fd = ::open(record.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::write(fd, line.data(), line.size());  // one write: O_APPEND keeps lines whole across processes
  ::close(fd);
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

RecordingHarness::RecordingHarness(std::filesystem::path record, int build_ms, int correctness_ms, int performance_ms,
                                   bool wrong)
    : record_(std::move(record)),
      build_ms_(build_ms),
      correctness_ms_(correctness_ms),
      performance_ms_(performance_ms),
      wrong_(wrong) {}

RecordingHarness RecordingHarness::FromEnvironment() {
  const char* record = std::getenv("KF_FAKE_RECORD");
  return RecordingHarness(record ? record : "", EnvInt("KF_FAKE_BUILD_MS", 0), EnvInt("KF_FAKE_CORRECTNESS_MS", 0),
                          EnvInt("KF_FAKE_PERFORMANCE_MS", 0), EnvInt("KF_FAKE_WRONG", 0) != 0);
}

BuildRun RecordingHarness::Build(const BuildRequest& request) const {
  const long long t0 = NowUs();
  const bool stopped = SleepUnlessStopped(build_ms_, request.stop);
  Append(record_, fmt::format("build {} {} {} {} {} {}\n", BuildTargetName(request.target), request.gpu_arch,
                              ::getpid(), t0, NowUs(), stopped ? 1 : 0));
  BuildRun b;
  b.result.result = ProcessResult::Create(stopped ? -9 : 0, "compiled", "", stopped ? "canceled" : "Build completed successfully");
  MemoryFileMap artifacts;
  artifacts.Set(std::string("lib_") + BuildTargetName(request.target) + ".so", "bytes");
  b.result.artifacts = artifacts;
  b.reason = stopped ? TerminationReason::kCanceled : TerminationReason::kExited;
  return b;
}

PhaseRun RecordingHarness::Correctness(const TestRequest& request) const {
  const long long t0 = NowUs();
  // A line of five fields (ReadSpans skips it) says the phase has begun: a test that stops a running phase
  // waits for it (StartedPhases) rather than guessing how long a job process takes to get there.
  Append(record_, fmt::format("correctness-begun {} {} {} {}\n", request.variant.key, request.gpu_arch, ::getpid(), t0));
  const bool stopped = SleepUnlessStopped(correctness_ms_, request.stop);
  Append(record_, fmt::format("correctness {} {} {} {} {} {}\n", request.variant.key, request.gpu_arch, ::getpid(), t0,
                              NowUs(), stopped ? 1 : 0));
  PhaseRun r;
  if (stopped) {
    r.result = ProcessResult::Create(-9, "", "", "canceled");
    r.verdict = {EvalStatus::kCanceled, "canceled"};
    r.reason = TerminationReason::kCanceled;
  } else if (wrong_ && !request.variant.reference) {
    r.result = ProcessResult::Create(70, "TestX::test_a FAILED\n", "", "value_mismatch: outputs differ (exit code 0)");
    r.verdict = {EvalStatus::kValueMismatch, "outputs differ"};
  } else {
    r.result = ProcessResult::Create(0, "TestX::test_a PASSED\n", "", std::nullopt);
    r.verdict = {EvalStatus::kCorrect, ""};
  }
  return r;
}

PhaseRun RecordingHarness::Performance(const TestRequest& request) const {
  const long long t0 = NowUs();
  const bool stopped = SleepUnlessStopped(performance_ms_, request.stop);
  Append(record_, fmt::format("performance {} {} {} {} {} {}\n", request.variant.key, request.gpu_arch, ::getpid(),
                              t0, NowUs(), stopped ? 1 : 0));
  PhaseRun r;
  if (stopped) {
    r.result = ProcessResult::Create(-9, "", "", "canceled");
    r.verdict = {EvalStatus::kCanceled, "canceled"};
    r.reason = TerminationReason::kCanceled;
    return r;
  }
  auto timed = [](bool reference) {
    const double ms = reference ? 4.0 : 2.0;
    ProcessResult p = ProcessResult::Create(0, "TestX::test_bench PASSED\n", "", std::nullopt);
    p.output_data = Json{{"runtimes", Json{{"TestX::test_bench", Json::array({ms, ms, ms})}}}};
    return p;
  };
  r.result = timed(request.variant.reference);
  r.verdict = {EvalStatus::kCorrect, ""};
  if (request.paired_with) {  // one process times both sides (no paired record: speedup from the two means)
    r.reference_result = timed(true);
    r.reference_verdict = Classification{EvalStatus::kCorrect, ""};
  }
  return r;
}

std::vector<PhaseSpan> ReadSpans(const std::filesystem::path& record) {
  std::vector<PhaseSpan> out;
  std::ifstream in(record);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    PhaseSpan p;
    int stopped = 0;
    if (s >> p.phase >> p.variant >> p.arch >> p.pid >> p.start_us >> p.end_us >> stopped) {
      p.stopped = stopped != 0;
      out.push_back(p);
    }
  }
  return out;
}

size_t StartedPhases(const std::filesystem::path& record, const std::string& phase) {
  std::ifstream in(record);
  std::string line;
  size_t n = 0;
  const std::string prefix = phase + "-begun ";
  while (std::getline(in, line)) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

bool Overlap(const PhaseSpan& a, const PhaseSpan& b) { return a.start_us < b.end_us && b.start_us < a.end_us; }

Task MakeFakeStageTask(const std::string& language, const std::string& arch) {
  return MakeFakeTask(fmt::format("task_name: fake\njob_name: fake_job\nlanguage: {}\ngpu_arch: {}\n"
                                  "has_reference_build_step: false\n",
                                  language, arch));
}

}  // namespace kf::testing
