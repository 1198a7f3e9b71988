// The test report: what a test run (pytest with the kernelfoundry plugin, or a native test program using the
// task SDK) hands back through its result pipe, and how a harness turns a run + its report into a typed
// verdict. One protocol for both harnesses (documented in include/kernelfoundry/sdk/task_sdk.hpp):
//   {"tests": [{"name", "kind", "status": "passed"|"failed"|"skipped"|"error", "message"}],
//    "runtimes": {name: [ms, …]}, "skipped_reason": string|null, "elapsed_ms": number, …}
// Internal to the harness module.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/process.hpp"
#include "kernelfoundry/verdict.hpp"

namespace kf::harness_internal {

/// A parsed report.
struct TestReport {
  struct Test {
    std::string name, kind, status, message;  ///< status: passed | failed | skipped | error
  };
  std::vector<Test> tests;
  Json runtimes = Json::object();            ///< {name: [ms, ...]}
  std::optional<std::string> skipped_reason;
  std::optional<double> elapsed_s;           ///< the program's own time ("elapsed_ms"), seconds
  /// Code the run compiles at test time (an OpenCL program, an NVRTC module…) did not build (issue 10
  /// fault 7): the document's top-level "build_error" {"message", "log"}, the first failure of the run.
  struct BuildError {
    std::string message, log;
  };
  std::optional<BuildError> build_error;
  Json document = Json::object();            ///< the whole document (fields beyond the ones above)

  /// How many tests have `status`.
  int Count(std::string_view status) const;
  /// The entry for `name`, or nullptr.
  const Test* Find(std::string_view name) const;
};

/// Parses a report. Throws kf::Error(kParse / kInvalidArgument, file "result document", field) for
/// malformed JSON, wrong types, or a status other than passed/failed/skipped/error.
TestReport ParseTestReport(const std::string& text);

/// The report of `run` (its result pipe data): the parsed report, or nullopt with `*problem` saying why
/// there is none ("no result report", "the result report is invalid: …").
std::optional<TestReport> ReadTestReport(const ProcessRun& run, std::string* problem);

/// How a harness's exit codes read when no report decides.
enum class ExitCodes {
  kPytest,  ///< 2 interrupted, 3 internal error, 4 usage error, 5 no tests collected
  kNative,  ///< 0 / 1 only; anything else is a test error
};

/// The verdict of one test run (both harnesses), in this order:
///  1. a termination reason that decides alone (timeouts, limits, crash by signal, cancellation);
///  2. pytest exit codes 2–5 (ExitCodes::kPytest);
///  3. no report → test_error naming `report_problem` and the exit code (a run that ended early, e.g. a
///     candidate calling _exit(0) after the first test, never passes); a report with "build_error" →
///     build_error with its message (the compiler's first error), whatever the tests reported;
///  4. an expected test that the report does not contain → test_error naming it;
///  5. a failed or errored test → value_mismatch when a test named "test_output_shapes_match…" passed,
///     shape_mismatch when it failed, else tests_failed (the reference's rule, on structured data);
///  6. every reported test skipped → skipped (with the report's reason);
///  7. a non-zero exit although every test passed → test_error;
///  8. otherwise correct (a passing run killed after its end marker stays correct, with a note).
Classification JudgeTestRun(const ProcessRun& run, const std::optional<TestReport>& report,
                            std::string_view report_problem, const std::vector<std::string>& expected,
                            ExitCodes exit_codes);

/// For a performance run judged correct: every passed test in `expected` (all passed tests when empty)
/// must have a non-empty runtime list under `runtime_key(name)`; otherwise kNoMeasurement naming them.
/// Returns the verdict unchanged when it is not correct.
Classification RequireRuntimes(Classification verdict, const TestReport& report,
                               const std::vector<std::string>& expected,
                               const std::function<std::string(const std::string&)>& runtime_key);

/// The EvalStatus of a timing record's status: the same-named one; error → test_error.
EvalStatus EvalStatusFor(PairedStatus status);

/// The verdict of a paired performance run's timing records: the worst status over the benchmarks (lowest
/// perf_score; output_changed_under_timing, input_mutated, suspicious, noisy, correct), its detail prefixed
/// with the benchmark. kCorrect when every record is correct.
Classification JudgeTiming(const PairedTiming& timing);

/// For a paired performance run judged correct so far: the timing document's records and conditions into
/// out->timing (typed; a malformed record makes the verdict test_error "protocol error: …"), the verdict from
/// JudgeTiming, and the reference side (its runtimes from "reference_runtimes", its verdict from
/// "reference_tests") into out->reference_result / reference_verdict.
void FillPairedRun(const TestReport& report, PhaseRun* out);

/// The performance-phase judgement both harnesses share: RequireRuntimes on out->verdict, FillPairedRun for a
/// paired run still correct, then the runtimes into out->result.output_data when measured (a paired run's
/// integrity verdict — noisy, suspicious, … — comes with its runtimes), or returncode -1 and the verdict's
/// detail in the message for kNoMeasurement.
void JudgePerformanceRun(const TestReport& report, const std::vector<std::string>& expected, bool paired,
                         const std::function<std::string(const std::string&)>& runtime_key, PhaseRun* out);

/// When the report has a build_error: the message gets "kernel build error: <message>" and stderr starts
/// with the message and the build log (so the log tail shows the compiler's first error). Otherwise a no-op.
void AttachBuildError(const TestReport& report, ProcessResult* result);

/// Wire compatibility: a run judged a failure whose process exited 0 (or 1 for a test_error) gets
/// returncode 70 and the verdict's detail appended to its message, so the reference's text-based scoring
/// cannot read it as a pass (see PhaseRun::result).
void MarkFailureForWire(const Classification& verdict, ProcessResult* result);

}  // namespace kf::harness_internal
