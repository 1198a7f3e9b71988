// ClassifyFromWire: the verdict of a correctness run that arrived as text — from the reference's workers
// or stored JSON — read the way the reference's evaluator reads it (spec §4.9 perf scale, §6 notes on pytest
// exit codes 2–5 and on the end-marker kill of a passing run). The only place scoring reads pytest output;
// local runs come with a typed Classification from their harness.
#include <regex>
#include <string>
#include <string_view>

#include "core/strings.hpp"
#include "kernelfoundry/pytest_summary.hpp"
#include "kernelfoundry/scoring.hpp"

namespace kf {
namespace {

/// Exit code 1: value mismatch iff a line shows the shape test passing (spec §4.9 perf 4). Extension: a
/// parametrised shape test (`test_output_shapes_match[...]`) counts too.
Classification ClassifyFailedTests(const std::string& output) {
  static const std::regex kShapePassed(R"(::test_output_shapes_match(\[[^\]]*\])?\s+PASSED)");
  static const std::regex kShapeFailed(R"(::test_output_shapes_match(\[[^\]]*\])?\s+(FAILED|ERROR))");
  bool shape_passed = false;
  bool shape_failed = false;
  for (std::string_view line : SplitLines(output)) {
    if (line.find("test_output_shapes_match") == std::string_view::npos) continue;
    const std::string l(line);
    if (std::regex_search(l, kShapePassed)) shape_passed = true;
    if (std::regex_search(l, kShapeFailed)) shape_failed = true;
  }
  // The reference: any passing shape-test line means a value mismatch (perf 4).
  if (shape_passed) return {EvalStatus::kValueMismatch, "tests failed although the output shapes match"};
  if (shape_failed) return {EvalStatus::kShapeMismatch, "the output shape test failed"};
  return {EvalStatus::kTestsFailed, "tests failed (no output shape test result)"};
}

/// A run killed after its summary line: the summary decides (the reference scored a passing run as a
/// crash, spec §6).
Classification ClassifyBySummary(const std::string& output) {
  std::optional<PytestSummary> summary = FindPytestSummary(output);
  if (!summary) return {EvalStatus::kTestTimeout, "pytest did not exit and printed no summary"};
  if (summary->Count("failed") > 0 || summary->Count("errors") > 0) return ClassifyFailedTests(output);
  if (summary->Count("passed") > 0) {
    return {EvalStatus::kCorrect, "all tests passed; pytest did not exit afterwards and was killed"};
  }
  return {EvalStatus::kTestTimeout, "pytest did not exit after its summary and ran no passing test"};
}

}  // namespace

Classification ClassifyFromWire(const ProcessResult& run) {
  const std::string output = run.stdout_text + "\n" + run.stderr_text;
  const std::string message = run.message.value_or("");
  const int rc = run.returncode;
  if (const size_t at = message.find("kernel build error: "); at != std::string::npos) {
    // Our harnesses' wire marker for a kernel compiled at test time that did not build (issue 10 fault 7).
    return {EvalStatus::kBuildError, message.substr(at + 20)};
  }
  if (const size_t at = message.find("protocol error: "); at != std::string::npos) {
    // Our harnesses' wire marker: the test run gave no usable report (see PhaseRun::result).
    return {EvalStatus::kTestError, message.substr(at)};
  }
  if (rc == 0) {
    std::optional<PytestSummary> summary = FindPytestSummary(output);
    if (summary && summary->Count("passed") == 0 && summary->Count("skipped") > 0) {
      // Exit 0 with every selected test skipped (e.g. no device): the reference scored this as correct.
      const std::string why = message.rfind("skipped: ", 0) == 0 ? " (" + message.substr(9) + ")" : "";
      return {EvalStatus::kSkipped, "every correctness test was skipped" + why};
    }
    return {EvalStatus::kCorrect, ""};
  }
  const std::string note = message.empty() ? std::string() : ": " + message;
  // The reference's runner messages (spec §4.7).
  if (message.find("timed out") != std::string::npos) return {EvalStatus::kTestTimeout, "test timed out" + note};
  if (message.find("inactivity") != std::string::npos) {
    return {EvalStatus::kTestTimeout, "test killed for inactivity" + note};
  }
  if (message.find("did not exit cleanly") != std::string::npos) return ClassifyBySummary(output);
  // Our runner's limit messages ("Process exceeded the memory limit of …", "Process output exceeded …").
  if (message.rfind("Process exceeded", 0) == 0 || message.rfind("Process output exceeded", 0) == 0) {
    return {EvalStatus::kResourceLimit, "resource limit exceeded" + note};
  }
  // Runner exceptions and container failures come back as returncode -1 with a message, not a signal.
  if (message.find("failed with error") != std::string::npos ||
      message.find("container image") != std::string::npos) {
    return {EvalStatus::kTestError, "the test could not be run" + note};
  }
  if (rc < 0) return {EvalStatus::kCrash, "test process killed by " + SignalName(-rc) + note};
  switch (rc) {
    case 1: return ClassifyFailedTests(output);
    case 2: return {EvalStatus::kPytestInterrupted, "pytest was interrupted (exit code 2)"};
    case 3: return {EvalStatus::kPytestInternal, "pytest internal error (exit code 3)"};
    case 4: return {EvalStatus::kPytestUsage, "pytest usage error (exit code 4)"};
    case 5: return {EvalStatus::kNoTestsCollected, "pytest collected no tests (exit code 5)"};
    default: return {EvalStatus::kTestError, "unexpected exit code " + std::to_string(rc) + note};
  }
}

}  // namespace kf
