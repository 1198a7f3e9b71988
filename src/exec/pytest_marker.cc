// End-of-run markers: the pytest final summary line and literal markers (reference spec §4.7, with the
// summary pattern widened to every outcome pytest 7 prints).
#include <array>
#include <cctype>

#include "exec/end_marker.hpp"

namespace kf::exec_internal {
namespace {

constexpr std::array<std::string_view, 12> kOutcomeWords = {
    "passed", "failed", "skipped", "deselected", "xfailed", "xpassed",
    "warning", "warnings", "error", "errors", "rerun", "reruns"};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

struct Counts {
  bool passed = false, failed = false, errors = false;
};

/// Parses "<n> <word>[, <n> <word>…]" or "no tests ran".
bool ParseParts(std::string_view parts, Counts* counts) {
  if (parts == "no tests ran") return true;
  while (true) {
    size_t comma = parts.find(", ");
    std::string_view part = parts.substr(0, comma);
    size_t i = 0;
    while (i < part.size() && IsDigit(part[i])) ++i;
    if (i == 0 || i + 1 >= part.size() || part[i] != ' ') return false;
    std::string_view word = part.substr(i + 1);
    bool known = false;
    for (auto w : kOutcomeWords) known = known || word == w;
    if (!known) return false;
    if (word == "passed") counts->passed = true;
    if (word == "failed") counts->failed = true;
    if (word == "error" || word == "errors") counts->errors = true;
    if (comma == std::string_view::npos) return true;
    parts.remove_prefix(comma + 2);
  }
}

/// Parses a summary line; nullopt when it is not one.
std::optional<Counts> ParseSummary(std::string_view line) {
  line = Trim(line);
  size_t lead = 0;
  while (lead < line.size() && line[lead] == '=') ++lead;
  size_t trail = 0;
  while (trail < line.size() - lead && line[line.size() - 1 - trail] == '=') ++trail;
  if (lead == 0 || trail == 0 || lead + trail + 2 >= line.size()) return std::nullopt;
  std::string_view inner = line.substr(lead, line.size() - lead - trail);
  if (inner.front() != ' ' || inner.back() != ' ') return std::nullopt;
  inner = inner.substr(1, inner.size() - 2);
  size_t in = inner.find(" in ");
  if (in == std::string_view::npos || in + 4 >= inner.size() || !IsDigit(inner[in + 4])) return std::nullopt;
  Counts counts;
  if (!ParseParts(inner.substr(0, in), &counts)) return std::nullopt;
  return counts;
}

}  // namespace

bool IsPytestSummaryLine(std::string_view line) { return ParseSummary(line).has_value(); }

std::optional<MarkerHit> MatchEndMarker(const std::string& marker, std::string_view line) {
  if (marker == "pytest") {
    auto counts = ParseSummary(line);
    if (!counts) return std::nullopt;
    bool all_passed = counts->passed && !counts->failed && !counts->errors;
    return MarkerHit{all_passed ? kPytestLingeringMessage : ""};
  }
  if (marker.empty() || line.find(marker) == std::string_view::npos) return std::nullopt;
  return MarkerHit{""};
}

}  // namespace kf::exec_internal
