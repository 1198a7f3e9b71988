// ConsoleReporter (see console_reporter.hpp).
#include "cli/console_reporter.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "cli/text_table.hpp"
#include "kernelfoundry/profile.hpp"

namespace kf::cli {
namespace {

std::string Ms(double v) { return v > 0 ? fmt::format("{:.4g}", v) : "-"; }
std::string Speedup(double v) { return v > 0 ? fmt::format("{:.3f}x", v) : "-"; }
// A benchmark's speedup; a paired one with its 95 % interval: "1.020x [0.990, 1.050]".
std::string RowSpeedup(const BenchmarkRow& b) {
  if (!b.paired || b.speedup <= 0 || b.speedup_ci_low <= 0 || b.speedup_ci_high <= 0) return Speedup(b.speedup);
  return fmt::format("{:.3f}x [{:.3f}, {:.3f}]", b.speedup, b.speedup_ci_low, b.speedup_ci_high);
}

void Print(std::FILE* out, const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), out);
}

}  // namespace

ConsoleReporter::ConsoleReporter(ConsoleOptions options)
    : options_(options), start_(std::chrono::steady_clock::now()) {}

void ConsoleReporter::ReportPhase(const PhaseEvent& e) {
  double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string what = PhaseName(e.phase);
  if (e.phase == Phase::kCorrectness || e.phase == Phase::kPerformance || e.phase == Phase::kProfile) {
    what += " " + e.variant + " (" + e.gpu_arch + ")";
  }
  std::string line;
  if (!e.finished) {
    line = fmt::format("kf: [{:7.1f}s] {} ...", now, what);
  } else {
    line = fmt::format("kf: [{:7.1f}s] {} {} in {:.1f} s", now, what, e.ok ? "passed" : "FAILED", e.elapsed_s);
    if (!e.ok && !e.note.empty()) line += ": " + e.note.substr(0, e.note.find('\n'));
  }
  std::lock_guard<std::mutex> lock(mu_);
  Print(options_.progress, line + "\n");
  std::fflush(options_.progress);
}

void ConsoleReporter::ReportOutputLine(bool is_stderr, const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  Print(options_.progress, fmt::format("  {} {}\n", is_stderr ? "!" : "|", line));
}

void ConsoleReporter::ReportVerdict(const Evaluation& ev, const RecordedRun* recorded) {
  std::lock_guard<std::mutex> lock(mu_);
  if (recorded != nullptr && recorded->canceled) {
    Print(options_.verdict, fmt::format("canceled: job {} is CANCELED in {}; {}\n", recorded->job_id,
                                        recorded->store,
                                        recorded->kernel_uuid.empty() ? "no verdict was stored"
                                                                      : "kernel " + recorded->kernel_uuid + " was stored"));
  } else if (options_.reference_check) {
    PrintReferenceCheck(ev);
  } else {
    PrintRunVerdict(ev);
    if (!ev.cached.is_null()) Print(options_.verdict, CachedNote(ev));
    if (recorded != nullptr) {
      Print(options_.verdict, fmt::format("stored: job {}, kernel {} in {}\n", recorded->job_id, recorded->kernel_uuid,
                                          recorded->store));
    }
  }
  std::fflush(options_.verdict);
  for (const auto& dir : ev.kept_dirs) Print(options_.progress, fmt::format("kf: kept work dir {}\n", dir.string()));
}

void ConsoleReporter::PrintRunVerdict(const Evaluation& ev) const {
  std::FILE* out = options_.verdict;
  const EvalResult& r = ev.result;
  bool multi_arch = ev.archs.size() > 1;
  using A = TextTable::Align;
  std::vector<TextTable::Column> columns = {
      {"benchmark", A::kLeft}, {"reference ms", A::kRight}, {"candidate ms", A::kRight}, {"speedup [95% CI]", A::kRight}};
  if (multi_arch) columns.insert(columns.begin(), {"arch", A::kLeft});
  TextTable table(columns);
  for (const BenchmarkRow& b : r.benchmarks) {
    std::vector<std::string> row = {b.name, Ms(b.reference_mean_ms), Ms(b.candidate_mean_ms), RowSpeedup(b)};
    if (multi_arch) row.insert(row.begin(), b.arch);
    table.AddRow(std::move(row));
  }
  if (!table.empty()) Print(out, table.Render() + "\n");
  if (std::any_of(r.benchmarks.begin(), r.benchmarks.end(), [](const BenchmarkRow& b) { return b.paired; })) {
    // Stranger test, 2026-12-05: 5.467 / 2.211 is 2.47, and the table said 2.60x.
    Print(out, "(ms: mean per call; a paired speedup is the median of the rounds' ratios, not the ratio of the means)\n");
  }
  Print(out, fmt::format("overall speedup (geomean): {}\n", Speedup(r.runtime_improvement)));
  Print(out, fmt::format("candidate runtime: {} ms\n", Ms(r.runtime)));
  Print(out, fmt::format("perf_score: {}   combined score: {}\n", r.perf_score,
                         ev.combined_score >= 0 ? fmt::format("{:.4g}", ev.combined_score) : "-"));
  Print(out, fmt::format("status: {}{}   (reference-compatible status: {})\n", EvalStatusName(r.status),
                         r.status_detail.empty() ? "" : " - " + r.status_detail, r.ReferenceStatus()));
  if (r.status == EvalStatus::kNoisy) {
    Print(out, "noisy: the candidate is correct, but the speedup's interval is wider than the target. Rerun it with "
               "nothing else running, or give it more time: eval_config.timing.budget_s and max_processes (budget_s "
               "is capped at 60 % of test_timeout; raise both).\n");
  }
  // Issue 14: one compact profile line per side (IPC, misses per kilo-instruction, page faults per call).
  for (const std::string& line : ProfileTableLines(ev.task.test_result, ev.task.test_result_reference)) {
    Print(out, line + "\n");
  }
  if (!IsCorrectVerdict(r) && r.status != EvalStatus::kSkipped && !r.eval_log.empty()) {
    // Why it failed, without -v or --json: the last lines of the log (compiler errors, failed asserts).
    constexpr size_t kTail = 20;
    std::vector<std::string> lines;
    size_t pos = 0;
    while (pos < r.eval_log.size()) {
      size_t nl = r.eval_log.find('\n', pos);
      std::string line = r.eval_log.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(std::move(line));
      pos = nl == std::string::npos ? r.eval_log.size() : nl + 1;
    }
    size_t from = lines.size() > kTail ? lines.size() - kTail : 0;
    Print(out, fmt::format("log (last {} of {} lines; all of it: --json or -v):\n", lines.size() - from, lines.size()));
    for (size_t i = from; i < lines.size(); ++i) Print(out, "  " + lines[i] + "\n");
  }
}

void ConsoleReporter::PrintReferenceCheck(const Evaluation& ev) const {
  std::FILE* out = options_.verdict;
  const EvalResult& r = ev.result;
  bool passed = r.status == EvalStatus::kReferenceOnly;
  Print(out, fmt::format("reference run: {} ({}){}\n", passed ? "PASSED" : "FAILED", EvalStatusName(r.status),
                         r.status_detail.empty() ? "" : " - " + r.status_detail));
  for (const BenchmarkRow& b : r.benchmarks) {
    Print(out, fmt::format("  {}{}: {} ms\n", b.arch.empty() ? "" : b.arch + " ", b.name, Ms(b.candidate_mean_ms)));
  }
  if (!passed && !r.eval_log.empty()) Print(out, r.eval_log + "\n");
}

}  // namespace kf::cli
