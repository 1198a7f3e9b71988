// ConsoleReporter — the human output of `kf run` and `kf validate --run` behind kf::EvaluationReporter:
// one progress line per phase start/end ("kf: [  12.3s] correctness custom (cpu) passed in 2.1 s"), child
// output lines in verbose mode ("  | …" stdout, "  ! …" stderr), then the verdict (kf run: the benchmark table,
// speedup, scores, status and, for a negative verdict, the log tail; kf validate --run: "reference run:
// PASSED|FAILED …"), the "stored: job …" line and the kept work dirs. Thread-safe.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>

#include "kernelfoundry/record.hpp"

namespace kf::cli {

struct ConsoleOptions {
  std::FILE* progress = stderr;  ///< phase lines, output lines, kept work dirs
  std::FILE* verdict = stdout;   ///< the verdict and the "stored:" line
  bool reference_check = false;  ///< kf validate --run: report the reference's own run
};

class ConsoleReporter final : public EvaluationReporter {
 public:
  /// Phase times are measured from construction.
  explicit ConsoleReporter(ConsoleOptions options);
  void ReportPhase(const PhaseEvent& event) override;
  void ReportOutputLine(bool is_stderr, const std::string& line) override;
  void ReportVerdict(const Evaluation& ev, const RecordedRun* recorded) override;

 private:
  void PrintRunVerdict(const Evaluation& ev) const;
  void PrintReferenceCheck(const Evaluation& ev) const;

  ConsoleOptions options_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
};

}  // namespace kf::cli
