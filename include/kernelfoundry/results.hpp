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
#include "kernelfoundry/terminal.hpp"  // StripTerminalEscapes, DecodeUtf8Replace

namespace kf {

/// The outcome of one child process (build, test, profiler pass).
struct ProcessResult {
  int returncode = 0;                 ///< exit status; negative = killed by that signal number
  std::string stdout_text;            ///< UTF-8, escapes stripped
  std::string stderr_text;            ///< UTF-8, escapes stripped
  std::optional<std::string> message; ///< pipeline note ("Process timed out after 120 seconds")
  std::optional<Json> output_data;    ///< parsed outputs, e.g. {"runtimes": {...}}

  /// Builds a result from raw child output: stdout/stderr/message decoded as UTF-8 with replacement
  /// (DecodeUtf8Replace) and stripped of terminal escapes (StripTerminalEscapes).
  static ProcessResult Create(int returncode, std::string_view stdout_bytes, std::string_view stderr_bytes,
                              std::optional<std::string> message = std::nullopt,
                              std::optional<Json> output_data = std::nullopt);
  /// message + "\n" + stdout + "\n" + stderr when include_message and the message is non-empty,
  /// else stdout + "\n" + stderr (reference combine_output).
  std::string CombineOutput(bool include_message = true) const;
  /// Merges named parts (spec §3.1, B9 fixed): stdout/stderr joined by "\n"; returncode = 0 only when all
  /// are 0, else the first non-zero (a signal beats success); messages joined; output_data = {name: data}
  /// for parts that have it, or null. Messages: the non-empty ones joined by "\n", "" when none (the
  /// reference's value). nullopt for an empty input.
  static std::optional<ProcessResult> Merge(const std::vector<std::pair<std::string, ProcessResult>>& parts);

  Json Encode() const;
  /// Decodes the JSON shape above; stdout/stderr/message are re-sanitised (replacement + stripping, both
  /// idempotent). "message"/"output_data" may be absent or null. Throws kf::Error(kParse) on unknown or
  /// missing required keys and on wrong types (the reference raises TypeError).
  static ProcessResult Decode(const Json& j);
  bool operator==(const ProcessResult&) const = default;
};

/// The outcome of a build (candidate or reference).
struct BuildResult {
  std::optional<Json> worker_info;
  std::optional<ProcessResult> result;
  std::optional<MemoryFileMap> artifacts;

  /// {"worker_info", "result", "artifacts"}; artifacts as a MemoryFileMap encoding; absent -> null.
  Json Encode() const;
  /// null -> nullopt. Missing keys count as null; unknown keys are ignored (as the reference's decode).
  /// Throws kf::Error(kParse) on wrong types (field names the JSON path).
  static std::optional<BuildResult> Decode(const Json& j);
  /// The JSON text of Encode(), written directly (artifact base64 straight into the output, no kf::Json
  /// built): byte-identical to DumpJson(Encode(), indent).
  std::string EncodeToString(int indent = -1) const;
  /// Decode(ParseJson(json, source)) through simdjson: the same result and errors, several times faster on
  /// big documents. Throws kf::Error(kParse) naming `source` for malformed JSON, else as Decode.
  static std::optional<BuildResult> DecodeFromString(std::string_view json,
                                                     const std::string& source = "<build result>");
  bool Ok() const { return result && result->returncode == 0; }
  bool operator==(const BuildResult&) const = default;
};

/// The outcome of the correctness and performance runs of one variant, possibly over several GPU archs.
struct TestResult {
  std::optional<Json> worker_info;
  std::optional<ProcessResult> correctness_result;
  std::optional<ProcessResult> performance_result;
  std::vector<std::pair<std::string, ProcessResult>> trace_results;  ///< ordered by insertion
  std::optional<std::vector<std::pair<std::string, TestResult>>> results_per_gpu;

  // Special members are defined out of line (results.cc): the type is recursive through results_per_gpu, and
  // clang + libstdc++ cannot instantiate the implicit ones while TestResult is still incomplete.
  TestResult();
  TestResult(const TestResult&);
  TestResult(TestResult&&) noexcept;
  TestResult& operator=(const TestResult&);
  TestResult& operator=(TestResult&&) noexcept;
  ~TestResult();

  /// Merges per-arch results (spec §3.3): one entry -> itself; otherwise (zero included) worker_info =
  /// {arch: info} for non-null infos, correctness/performance = ProcessResult::Merge of the archs that
  /// have one (B9 fixed there), trace keys "<name>_<arch>" (arch-major order), results_per_gpu = input.
  static TestResult Merge(const std::vector<std::pair<std::string, TestResult>>& per_arch);

  /// {"worker_info", "correctness_result", "performance_result", "trace_results": {name: PR},
  ///  "results_per_gpu": {arch: TestResult}|null} (recursive).
  Json Encode() const;
  /// null -> nullopt; keeps results_per_gpu (B10 fixed). Missing keys count as null/empty; unknown keys
  /// are ignored. Throws kf::Error(kParse) on wrong types (field names the JSON path).
  static std::optional<TestResult> Decode(const Json& j);
  /// The JSON text of Encode(), written directly: byte-identical to DumpJson(Encode(), indent).
  std::string EncodeToString(int indent = -1) const;
  /// Decode(ParseJson(json, source)) through simdjson: the same result and errors (see BuildResult).
  static std::optional<TestResult> DecodeFromString(std::string_view json,
                                                    const std::string& source = "<test result>");
  /// Field-wise equality (out of line for the same reason).
  bool operator==(const TestResult& other) const;
};

}  // namespace kf
