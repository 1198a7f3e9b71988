// A fake harness for the worker's stage tests (in-process and in the kf_fake_worker_child helper): every
// phase sleeps a configurable time (stop-aware) and appends "<phase> <variant> <arch> <pid> <start_us>
// <end_us> <stopped>" to a record file (CLOCK_MONOTONIC microseconds: comparable across processes), so tests
// can check which phases of different jobs overlapped. Verdicts are configurable per variant.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/task.hpp"

namespace kf::testing {

/// One recorded phase.
struct PhaseSpan {
  std::string phase;   ///< "build", "correctness", "performance"
  std::string variant;
  std::string arch;
  int pid = 0;
  long long start_us = 0, end_us = 0;
  bool stopped = false;   ///< the request's stop_token was requested during the phase
};

class RecordingHarness final : public Harness {
 public:
  /// Settings: record file, sleep per phase (ms); `wrong` = the candidate's correctness is a value mismatch
  /// (the wire then reads returncode 70, as our harnesses mark a failure the process did not report).
  RecordingHarness(std::filesystem::path record, int build_ms, int correctness_ms, int performance_ms, bool wrong = false);
  /// The same from KF_FAKE_RECORD, KF_FAKE_BUILD_MS, KF_FAKE_CORRECTNESS_MS, KF_FAKE_PERFORMANCE_MS,
  /// KF_FAKE_WRONG (for the helper process).
  static RecordingHarness FromEnvironment();

  std::string_view Name() const override { return "recording"; }
  BuildRun Build(const BuildRequest& request) const override;
  PhaseRun Correctness(const TestRequest& request) const override;
  PhaseRun Performance(const TestRequest& request) const override;

 private:
  std::filesystem::path record_;
  int build_ms_, correctness_ms_, performance_ms_;
  bool wrong_;
};

/// Reads a record file.
std::vector<PhaseSpan> ReadSpans(const std::filesystem::path& record);
/// True when two spans share any instant.
/// How many `phase` runs ("correctness") have begun according to `record`, ended or not (0 when it is missing).
size_t StartedPhases(const std::filesystem::path& record, const std::string& phase);
bool Overlap(const PhaseSpan& a, const PhaseSpan& b);

/// A small task for the fake harness: config {task_name, job_name, language: `language`, gpu_arch: `arch`},
/// one EVOLVE block, correctness test TestX::test_a, profile test TestX::test_bench. RecordingHarness answers a
/// paired performance request in one call (one recorded span) with both sides' runtimes.
Task MakeFakeStageTask(const std::string& language, const std::string& arch);

}  // namespace kf::testing
