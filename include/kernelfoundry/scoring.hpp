// Scoring — turns build and test results into a verdict (reference spec §4.9, `algorithm/evaluator.py`).
//
// Contract:
//  * Every outcome has a typed EvalStatus (stable snake_case name) and maps to the reference's perf_score
//    (0 extraction failed / evaluation error, 1 not compiled, 2 crash/timeout/odd pytest exit, 3 tests
//    failed, 4 value mismatch, 5 correct) and to its status string (correct / compiled / error).
//  * EvalResult mirrors the reference's `schemas.EvalResult`; ToReferenceJson() is its exact wire dict.
//  * Runtimes are milliseconds. runtime_stats keep the reference's 3-significant-digit view, but speedups
//    are computed from the unrounded means (B16 fixed) and only when both means are finite and > 0.
//  * No NaN or infinity ever reaches an EvalResult: invalid speedups use the reference's sentinel
//    9.999e-10 where the wire format has one (runtime_stats, runtime_improvement), -1 elsewhere.
//  * Pure functions of their inputs: no I/O, no globals; safe to call concurrently.
// Scoring depends on core only (ProcessResult, TestResult); runner termination reasons come in as the
// small StopReason enum (or the exec module's snake_case reason name), not as exec types.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/measure.hpp"
#include "kernelfoundry/results.hpp"

namespace kf {

/// The outcome of evaluating one candidate. Names (EvalStatusName) are stable: they appear in JSON and
/// the CLI. The comment gives the reference perf_score each maps to.
enum class EvalStatus {
  kNotEvaluated,       ///< -1: nothing scored yet
  kCorrect,            ///< 5: correct, timed, speedup against the reference
  kNoReference,        ///< 5: correct and timed, but no reference timing to compare with
  kNoMeasurement,      ///< 5: correct, but a benchmark has no valid timing (missing, empty, zero, failed run)
  kReferenceOnly,      ///< 5: only the reference was tested (B20: the reference returned None)
  kValueMismatch,      ///< 4: pytest exit 1, shape test passed, values wrong
  kShapeMismatch,      ///< 3: pytest exit 1, the shape test failed
  kTestsFailed,        ///< 3: pytest exit 1, no shape test result in the output
  kCrash,              ///< 2: the test process was killed by a signal (segfault, abort…)
  kTestTimeout,        ///< 2: wall-clock or inactivity timeout of the test process
  kResourceLimit,      ///< 2: memory, output or CPU-time limit hit
  kTestError,          ///< 2: the runner could not run pytest, or an unexpected exit code
  kNoTestResult,       ///< 2: no correctness result at all
  kPytestInterrupted,  ///< 2: pytest exit code 2
  kPytestInternal,     ///< 2: pytest exit code 3
  kPytestUsage,        ///< 2: pytest exit code 4
  kNoTestsCollected,   ///< 2: pytest exit code 5
  kBuildError,         ///< 1: the build failed
  kBuildTimeout,       ///< 1: the build was killed for time or inactivity
  kExtractionFailed,   ///< 0: the candidate code could not be put into the blocks
  kSkipped,            ///< 0: not evaluated here (e.g. every correctness test skipped: no device)
  kReferenceFailed,    ///< 0: the reference's own correctness run failed; nothing can be compared
  kEvaluationError,    ///< 0: an exception during evaluation (set by the caller)
  /// 0: OUR environment failed (cache dir not creatable, work dir not writable, interpreter or shell
  /// missing, the test program could not be started): never a score of the candidate, never cached as a
  /// verdict; the detail names the path. Reference-compatible status "error".
  kInfrastructureError,
};

/// Stable snake_case name ("correct", "no_reference", "value_mismatch", …).
std::string_view EvalStatusName(EvalStatus status);
/// Inverse of EvalStatusName; nullopt for an unknown name.
std::optional<EvalStatus> EvalStatusFromName(std::string_view name);
/// The reference's perf_score for a status (-1 for kNotEvaluated), see the enum comments.
int PerfScoreFor(EvalStatus status);
/// The reference's status string: "correct" (perf 5), "compiled" (2–4), "error" (0–1 and not evaluated).
std::string_view ReferenceStatusFor(EvalStatus status);

/// Why a runner stopped a process, for classification. Mirrors the exec module's termination reasons
/// without depending on it.
enum class StopReason {
  kExited,          ///< exited on its own
  kSignaled,        ///< killed by a signal it did not get from the runner
  kWallTimeout,     ///< overall timeout
  kInactivity,      ///< no output for too long
  kEndMarkerGrace,  ///< pytest printed its summary but did not exit; killed after the grace period
  kMemoryLimit,
  kOutputLimit,
  kCpuLimit,
  kSpawnFailed,     ///< could not be started
};
/// Parses the exec module's reason names: "exited", "signaled", "wall_timeout", "inactivity",
/// "end_marker_grace", "memory_limit", "output_limit", "cpu_limit", "spawn_failed". nullopt otherwise.
std::optional<StopReason> StopReasonFromName(std::string_view name);

/// The reference's sentinel for a speedup that could not be computed (wire format only).
inline constexpr double kInvalidSpeedup = 9.999e-10;
/// The reference's runtime (ms) for a benchmark without any measurement; stored rounded (1e11).
inline constexpr double kMissingRuntimeMs = 9.999e10;

/// The reference's get_timing_stats dict for `stats` (TimingStats, ComputeTimingStats and RoundSignificant
/// live in measure.hpp — one implementation): {"mean","std","min","max","median","speedup":-1,
/// "ref_speed":-1,"num_trials"}, every value rounded to 3 significant digits.
Json TimingStatsToReferenceJson(const TimingStats& stats);

/// Geometric mean of the values > 0 (others ignored); -1 when there are none. One value is returned as is;
/// otherwise exp(mean(log)). Never NaN.
double GeometricMean(const std::vector<double>& values);

/// One row of the per-benchmark table shown by the CLI. Means are unrounded; -1 = not available.
struct BenchmarkRow {
  std::string arch;                 ///< empty for a single-arch result
  std::string name;                 ///< pytest node id
  double reference_mean_ms = -1;
  double candidate_mean_ms = -1;
  double speedup = -1;              ///< reference / candidate, -1 when not computable (no sentinel)
  int num_trials = 0;               ///< candidate trials
};

/// The verdict for one candidate (one variant on one arch, or combined).
struct EvalResult {
  // --- the reference's schemas.EvalResult fields, in its order ---
  bool compiled = false;
  bool correctness = false;
  Json metadata = Json::object();        ///< {"eval_worker_info": …}; combined: {arch: {...}}
  double runtime = -1;                   ///< ms: mean of the benchmarks' (rounded) means
  Json runtime_stats = Json::object();   ///< {node id: stats} (combined: {arch: {node id: stats}})
  double runtime_improvement = -1;       ///< speedup over the reference (geometric mean)
  double improve_over_compile = -1;
  int perf_score = -1;
  Json profiler_data = Json::object();
  Json template_results = Json::object();
  std::string eval_log;                  ///< human-readable log (pytest / compiler output, notes)
  // --- ours ---
  EvalStatus status = EvalStatus::kNotEvaluated;
  std::string status_detail;             ///< one line: why (exit code, signal, benchmark name…)
  std::vector<BenchmarkRow> benchmarks;

  /// The reference's status string for this result (see ReferenceStatusFor).
  std::string_view ReferenceStatus() const { return ReferenceStatusFor(status); }
  /// Exactly the reference's EvalResult dict: compiled … template_results (no eval_log).
  Json ToReferenceJson() const;
  /// ToReferenceJson() plus "eval_log", "status", "status_detail", "reference_status", "benchmarks".
  Json ToJson() const;
};

/// The verdict of a correctness run, from its exit code, output and termination reason.
struct Classification {
  EvalStatus status = EvalStatus::kNotEvaluated;
  std::string detail;
};

/// Classifies a pytest correctness run (spec §4.9 perf scale, with typed statuses):
///  exit 0 -> kCorrect (kSkipped when the summary shows only skipped tests); a runner timeout (typed
///  reason, or the message "timed out"/"inactivity") -> kTestTimeout; memory/output/CPU limit ->
///  kResourceLimit; end-marker kill -> judged by the pytest summary line (a passing run stays correct —
///  the reference scored it as a crash); negative exit -> kCrash; exit 1 -> kValueMismatch iff a line has
///  "::test_output_shapes_match" + whitespace + "PASSED", kShapeMismatch if it shows FAILED/ERROR, else
///  kTestsFailed; 2/3/4/5 -> kPytestInterrupted/Internal/Usage/kNoTestsCollected; other -> kTestError.
Classification ClassifyCorrectness(const ProcessResult& run, std::optional<StopReason> reason = std::nullopt);

/// Options of ConvertTestResult.
struct ConvertOptions {
  std::string variant = "custom";                      ///< variant key, used in log lines
  std::optional<StopReason> correctness_stop;          ///< how the runner ended the correctness run
  std::optional<StopReason> performance_stop;          ///< … and the performance run
  size_t log_cap_chars = 16000;                        ///< cap of each pytest log excerpt
};

/// convert_test_result_to_exec_result (spec §4.9): scores one variant's TestResult against an optional
/// reference TestResult. Never throws for bad data: an empty runtime list, a zero mean or a missing
/// worker_info become statuses (B18 fixed), a failed reference correctness run gives kReferenceFailed.
/// Speedups come from unrounded means (B16 fixed); runtime and runtime_stats keep the reference's
/// rounded values.
EvalResult ConvertTestResult(const TestResult& candidate, const std::optional<TestResult>& reference,
                             const ConvertOptions& options = {});

/// B20 fix: the verdict when only the reference was tested (the reference's Evaluator returned None).
/// Its own timings, no speedup; status kReferenceOnly, or the failure status of its correctness run.
EvalResult ReferenceOnlyResult(const TestResult& reference, const ConvertOptions& options = {});

/// combine_gpu_arch_results (spec §4.9): metadata {arch: meta}; any arch not compiled -> perf 1; any arch
/// incorrect -> the minimum perf; else runtime = mean over archs, runtime_stats {arch: stats},
/// runtime_improvement = geometric mean of every positive (arch, benchmark) speedup (-1 and status
/// kNoReference when none: the reference gave NaN), perf 5, profiler data of the first arch.
/// Throws kf::Error(kInvalidArgument) for an empty input.
EvalResult CombineArchResults(const std::vector<std::pair<std::string, EvalResult>>& per_arch);
/// Same, archs in key order. (A template so that a braced list picks the ordered overload above.)
template <typename Compare, typename Alloc>
EvalResult CombineArchResults(const std::map<std::string, EvalResult, Compare, Alloc>& per_arch) {
  return CombineArchResults(std::vector<std::pair<std::string, EvalResult>>(per_arch.begin(), per_arch.end()));
}

/// One templated variant: its key ("custom_16_32"), its typed parameters (a JSON array, B21 fixed) and
/// its verdict.
struct TemplateVariant {
  std::string key;
  Json params = Json::array();
  EvalResult result;
};

/// combine_template_results (spec §4.9): the variant with the best combined fitness wins (first on a tie;
/// unevaluated variants never win); metadata["template_parameters"] = its params; template_results maps
/// the Python str() of each variant's params list ("[16, 32]") to its reference dict without
/// runtime_improvement, improve_over_compile, metadata and template_results. One variant is returned
/// unchanged. Throws kf::Error(kInvalidArgument) for an empty input.
EvalResult CombineTemplateResults(const std::vector<TemplateVariant>& variants);

/// Python's str() of a JSON value as a list/tuple element: 16, 1.5, 'a', True, None; arrays as [a, b].
std::string PythonRepr(const Json& value);

/// compute_performance_score (spec §4.9): perf_score + runtime_improvement when > 0; otherwise
/// perf_score + 1/runtime when runtime_improvement == -1, correct and runtime > 0; else perf_score.
/// Throws kf::Error(kInvalidArgument, "perf_score is still -1, …") for an unevaluated result.
double ComputePerformanceScore(const EvalResult& result);

/// The verdict for a candidate whose code could not be extracted (perf 0); the log holds its stderr.
EvalResult ExtractionFailureResult(const ProcessResult& extract);

/// The verdict for a failed build (perf 1): kBuildTimeout when `reason` is a wall/inactivity/CPU timeout
/// or the message says "timed out"/"inactivity", else kBuildError. The log holds the post-processed
/// compiler output (PostprocessCompilerOutput with `project_dir`).
EvalResult BuildFailureResult(const ProcessResult& build, std::optional<StopReason> reason = std::nullopt,
                              std::string_view project_dir = {});

/// Post-processes pytest output for eval_log: starts at the first line containing "task.py::" (whole
/// output when there is none), drops "could not import" skip noise, collapses tensor dumps to
/// "tensor(...)", caps the length at `cap_chars` (head and tail kept, the cut marked), and returns
/// "==== test session starts\n\n" + that text, trailing whitespace removed.
std::string PostprocessPytestOutput(std::string_view output, size_t cap_chars = 16000);

/// Collapses every "tensor(" … matching ")" (across lines) to "tensor(...)".
std::string CollapseTensorDumps(std::string_view text);

/// Post-processes compiler output for eval_log: cut after "ninja: build stopped", `project_dir` shortened
/// to "<project_dir>", long compiler command lines shortened, warnings about files outside the project
/// dropped, include stacks collapsed; at most `head_chars` of text plus up to `error_chars` of the error
/// lines that were cut off.
std::string PostprocessCompilerOutput(std::string_view output, std::string_view project_dir = {},
                                      size_t head_chars = 5000, size_t error_chars = 2000);

}  // namespace kf
