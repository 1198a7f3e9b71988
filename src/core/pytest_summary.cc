// pytest's final summary line, parsed and written (kernelfoundry/pytest_summary.hpp).
#include "kernelfoundry/pytest_summary.hpp"

#include <array>
#include <cstdlib>

#include <fmt/format.h>

#include "core/strings.hpp"

namespace kf {
namespace {

struct Word {
  std::string_view spelled;
  const char* normalised;
};

constexpr std::array<Word, 12> kWords = {{{"passed", "passed"},
                                          {"failed", "failed"},
                                          {"skipped", "skipped"},
                                          {"deselected", "deselected"},
                                          {"xfailed", "xfailed"},
                                          {"xpassed", "xpassed"},
                                          {"warning", "warnings"},
                                          {"warnings", "warnings"},
                                          {"error", "errors"},
                                          {"errors", "errors"},
                                          {"rerun", "rerun"},
                                          {"reruns", "rerun"}}};

// pytest's order in the summary line.
constexpr std::array<const char*, 9> kOrder = {"failed",  "passed",   "skipped", "deselected", "xfailed",
                                               "xpassed", "warnings", "errors",  "rerun"};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Parses "<n> <word>[, <n> <word>…]" or "no tests ran" into `counts`.
bool ParseParts(std::string_view parts, std::map<std::string, int>* counts) {
  if (parts == "no tests ran") return true;
  while (true) {
    const size_t comma = parts.find(", ");
    std::string_view part = parts.substr(0, comma);
    size_t i = 0;
    while (i < part.size() && IsDigit(part[i])) ++i;
    if (i == 0 || i > 9 || i + 1 >= part.size() || part[i] != ' ') return false;
    const std::string_view word = part.substr(i + 1);
    const Word* known = nullptr;
    for (const Word& w : kWords) {
      if (w.spelled == word) known = &w;
    }
    if (known == nullptr) return false;
    (*counts)[known->normalised] += std::atoi(std::string(part.substr(0, i)).c_str());
    if (comma == std::string_view::npos) return true;
    parts.remove_prefix(comma + 2);
  }
}

}  // namespace

int PytestSummary::Count(const std::string& word) const {
  auto it = counts.find(word);
  return it == counts.end() ? 0 : it->second;
}

int PytestSummary::ImpliedExitCode() const {
  if (Count("failed") > 0 || Count("errors") > 0) return 1;
  if (Count("passed") + Count("skipped") + Count("xfailed") + Count("xpassed") == 0) return 5;
  return 0;
}

std::optional<PytestSummary> ParsePytestSummaryLine(std::string_view line) {
  line = Trim(line);
  size_t lead = 0;
  while (lead < line.size() && line[lead] == '=') ++lead;
  size_t trail = 0;
  while (trail < line.size() - lead && line[line.size() - 1 - trail] == '=') ++trail;
  if (lead == 0 || trail == 0 || lead + trail + 2 >= line.size()) return std::nullopt;
  std::string_view inner = line.substr(lead, line.size() - lead - trail);
  if (inner.front() != ' ' || inner.back() != ' ') return std::nullopt;
  inner = inner.substr(1, inner.size() - 2);
  const size_t in = inner.rfind(" in ");
  if (in == std::string_view::npos || in + 4 >= inner.size() || !IsDigit(inner[in + 4])) return std::nullopt;
  PytestSummary summary;
  if (!ParseParts(inner.substr(0, in), &summary.counts)) return std::nullopt;
  summary.seconds = std::strtod(std::string(inner.substr(in + 4)).c_str(), nullptr);
  return summary;
}

std::optional<PytestSummary> FindPytestSummary(std::string_view output) {
  std::optional<PytestSummary> found;
  for (std::string_view line : SplitLines(output)) {
    if (line.find('=') == std::string_view::npos) continue;
    if (auto s = ParsePytestSummaryLine(line)) found = std::move(s);
  }
  return found;
}

std::string FormatPytestSummary(const PytestSummary& summary) {
  std::string parts;
  for (const char* word : kOrder) {
    const int n = summary.Count(word);
    if (n == 0) continue;
    std::string w = word;
    if (n == 1 && (w == "warnings" || w == "errors")) w.pop_back();
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", n, w);
  }
  if (parts.empty()) parts = "no tests ran";
  return fmt::format("==== {} in {:.2f}s ====", parts, summary.seconds);
}

}  // namespace kf
