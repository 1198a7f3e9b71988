// Internal helpers shared by scoring.cc and pytest_log.cc (not part of the public API).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kf::scoring_internal {

/// Counts of the last pytest summary line ("=== 3 passed, 1 failed in 0.12s ==="), keyed by the plural
/// word ("passed", "failed", "errors", "skipped", "warnings", "deselected", "xfailed", "xpassed",
/// "rerun"). nullopt when the output has no summary line.
std::optional<std::map<std::string, int>> ParsePytestSummary(std::string_view output);

/// Splits text into lines (without the '\n'); a trailing newline does not add an empty line.
std::vector<std::string_view> SplitLines(std::string_view text);

/// Keeps the first quarter and the rest from the end of `text` when it is longer than `cap` characters
/// (bytes), cutting on UTF-8 boundaries and marking the cut.
std::string CapMiddle(std::string_view text, size_t cap);

/// Case-insensitive substring search.
bool ContainsNoCase(std::string_view haystack, std::string_view needle);

}  // namespace kf::scoring_internal
