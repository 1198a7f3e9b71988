// ProcessResult, BuildResult, TestResult — the outcomes of build and test runs (reference spec §3.1–§3.3).
//
// All three are plain values with JSON codecs whose shapes match the reference exactly:
//   ProcessResult  {"returncode", "stdout", "stderr", "message", "output_data"}
//   BuildResult    {"worker_info", "result", "artifacts"}
//   TestResult     {"worker_info", "correctness_result", "performance_result", "trace_results",
//                   "results_per_gpu"}
// Fixes: ProcessResult::Merge fails if any part failed (B9) and keeps output_data per part;
// TestResult::Decode keeps results_per_gpu (B10).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/memory_file_map.hpp"

namespace kf {

/// Strips terminal escape sequences as the reference's strip_terminal_escapes (spec §3.1): OSC-8 links
/// rendered as text, DCS/SOS/PM/APC/OSC/CSI and short escapes removed, stray ESC removed. Idempotent.
std::string StripTerminalEscapes(std::string_view text);

/// Decodes bytes as UTF-8, replacing each invalid sequence with U+FFFD the way Python's
/// bytes.decode("utf-8", "replace") does (maximal subparts).
std::string DecodeUtf8Replace(std::string_view bytes);

/// The outcome of one child process (build, test, profiler pass).
struct ProcessResult {
  int returncode = 0;                 ///< exit status; negative = killed by that signal number
  std::string stdout_text;            ///< UTF-8, escapes stripped
  std::string stderr_text;            ///< UTF-8, escapes stripped
  std::optional<std::string> message; ///< pipeline note ("Process timed out after 120 seconds")
  std::optional<Json> output_data;    ///< parsed outputs, e.g. {"runtimes": {...}}

  /// Builds a result from raw child output: bytes decoded with replacement, escapes stripped.
  static ProcessResult Create(int returncode, std::string_view stdout_bytes, std::string_view stderr_bytes,
                              std::optional<std::string> message = std::nullopt,
                              std::optional<Json> output_data = std::nullopt);
  /// message + "\n" + stdout + "\n" + stderr (message only when set and requested).
  std::string CombineOutput(bool include_message = true) const;
  /// Merges named parts (spec §3.1, B9 fixed): stdout/stderr joined by "\n"; returncode = 0 only when all
  /// are 0, else the first non-zero (a signal beats success); messages joined; output_data = {name: data}
  /// for parts that have it, or null. nullopt for an empty input.
  static std::optional<ProcessResult> Merge(const std::vector<std::pair<std::string, ProcessResult>>& parts);

  Json Encode() const;
  /// Throws kf::Error(kParse) on unknown keys or wrong types (the reference raises TypeError).
  static ProcessResult Decode(const Json& j);
  bool operator==(const ProcessResult&) const = default;
};

/// The outcome of a build (candidate or reference).
struct BuildResult {
  std::optional<Json> worker_info;
  std::optional<ProcessResult> result;
  std::optional<MemoryFileMap> artifacts;

  Json Encode() const;
  static std::optional<BuildResult> Decode(const Json& j);  ///< null -> nullopt
  bool Ok() const { return result && result->returncode == 0; }
};

/// The outcome of the correctness and performance runs of one variant, possibly over several GPU archs.
struct TestResult {
  std::optional<Json> worker_info;
  std::optional<ProcessResult> correctness_result;
  std::optional<ProcessResult> performance_result;
  std::vector<std::pair<std::string, ProcessResult>> trace_results;  ///< ordered by insertion
  std::optional<std::vector<std::pair<std::string, TestResult>>> results_per_gpu;

  /// Merges per-arch results (spec §3.3): one entry -> itself; otherwise worker_info {arch: info},
  /// merged correctness/performance, trace keys "<name>_<arch>", results_per_gpu = input.
  static TestResult Merge(const std::vector<std::pair<std::string, TestResult>>& per_arch);

  Json Encode() const;
  static std::optional<TestResult> Decode(const Json& j);  ///< null -> nullopt; keeps results_per_gpu
};

}  // namespace kf
