// PytestSummary — pytest's final summary line ("==== 3 passed, 1 failed, 2 warnings in 0.12s ===="), parsed
// and written in one place (reference spec §4.7 end marker, §4.9 scoring of wire results).
//
// Who uses it: the pytest harness (the end-of-run line matcher it gives the process runner), the native
// harness (the pytest-shaped report it adds to its stdout for wire compatibility), and scoring's
// ClassifyFromWire (results that arrive as text from the reference's workers). Local verdicts never parse
// it: harnesses hand scoring a typed Classification.
//
// Accepted lines (after trimming): "=+ <parts> in <seconds>[s][ (<h:mm:ss>)] =+" where <parts> is "no tests
// ran" or comma-separated "<n> <word>" with word one of passed, failed, skipped, deselected, xfailed,
// xpassed, warning(s), error(s), rerun(s). The reference's pattern missed the singular warning/error,
// xfailed, xpassed, rerun and "no tests ran" (spec §6); we accept them. Pure functions; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kf {

/// The counts of one summary line, keyed by the normalised word: "passed", "failed", "skipped",
/// "deselected", "xfailed", "xpassed", "warnings", "errors", "rerun" (singular warning/error and "reruns"
/// are normalised to these). "no tests ran" gives no counts.
struct PytestSummary {
  std::map<std::string, int> counts;
  double seconds = 0;   ///< the session time the line reports
  /// The count for `word` (0 when absent).
  int Count(const std::string& word) const;
  /// pytest's exit code for this summary: 1 when something failed or errored, 5 when nothing ran (no
  /// passed/skipped/xfailed/xpassed test), else 0.
  int ImpliedExitCode() const;
};

/// Parses one line; nullopt when it is not a summary line.
std::optional<PytestSummary> ParsePytestSummaryLine(std::string_view line);

/// The LAST summary line in `output` (pytest prints one at the end), or nullopt.
std::optional<PytestSummary> FindPytestSummary(std::string_view output);

/// Writes a summary line the way pytest does: "==== 2 passed, 1 failed in 0.12s ====" (counts in pytest's
/// order failed, passed, skipped, deselected, xfailed, xpassed, warnings, errors, rerun; "no tests ran"
/// when empty; seconds with two decimals).
std::string FormatPytestSummary(const PytestSummary& summary);

}  // namespace kf
