// End-of-run markers (reference spec §4.7): the pytest summary line, or a literal substring.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kf::exec_internal {

/// What a matching marker line means for the run.
struct MarkerHit {
  /// The message used when the process has to be killed after the grace: for pytest "All tests passed but
  /// the process did not exit cleanly and had to be terminated." when the line reports passes and neither
  /// failures nor errors, else "" (the reference's empty message).
  std::string message;
};

/// The message of a pytest end-marker kill when all tests passed.
inline constexpr const char* kPytestLingeringMessage =
    "All tests passed but the process did not exit cleanly and had to be terminated.";

/// True when `line` (escapes already stripped) is a pytest final summary line: after trimming it is
/// "=+ <parts> in <duration>… =+" where parts are "no tests ran" or comma-separated "<n> <word>" with word
/// one of passed, failed, skipped, deselected, xfailed, xpassed, warning(s), error(s), rerun.
/// Fixes the reference, whose pattern missed singular warning/error, xfailed, xpassed, rerun, no tests ran.
bool IsPytestSummaryLine(std::string_view line);

/// Matches `line` against `marker` ("pytest" or a literal). nullopt = no match.
std::optional<MarkerHit> MatchEndMarker(const std::string& marker, std::string_view line);

}  // namespace kf::exec_internal
