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
//  * Local runs hand scoring typed verdicts (Classification, from the harnesses); only results that arrive
//    as text — from the reference's workers, or stored JSON — are classified from their output, in one
//    function named for that (ClassifyFromWire).
//  * Pure functions of their inputs: no I/O, no globals; safe to call concurrently.
// The status vocabulary (EvalStatus, Classification, TerminationReason) is core's (verdict.hpp); log
// post-processing helpers are internal (src/pipeline/eval_log.hpp).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/measure.hpp"
#include "kernelfoundry/paired_wire.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/verdict.hpp"

namespace kf {

/// The reference's sentinel for a speedup that could not be computed (wire format only).
inline constexpr double kInvalidSpeedup = 9.999e-10;
/// The reference's runtime (ms) for a benchmark without any measurement; stored rounded (1e11).
inline constexpr double kMissingRuntimeMs = 9.999e10;

/// The reference's get_timing_stats dict for `stats` (TimingStats, ComputeTimingStats and RoundSignificant
/// live in measure.hpp — one implementation): {"mean","std","min","max","median","speedup":-1,
/// "ref_speed":-1,"num_trials"}, every value rounded to 3 significant digits.
Json TimingStatsToReferenceJson(const TimingStats& stats);

/// One row of the per-benchmark table shown by the CLI. Means are unrounded; -1 = not available.
struct BenchmarkRow {
  std::string arch;                 ///< empty for a single-arch result
  std::string name;                 ///< pytest node id
  double reference_mean_ms = -1;
  double candidate_mean_ms = -1;
  double speedup = -1;              ///< reference / candidate, -1 when not computable (no sentinel);
                                    ///< paired: the median of the per-round ratios
  int num_trials = 0;               ///< candidate trials (paired: measured rounds)
  bool paired = false;              ///< timed against the reference in the same process (paired.hpp)
  double speedup_ci_low = -1;       ///< paired: the 95 % confidence interval of the speedup
  double speedup_ci_high = -1;
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
  /// The paired timing records and the conditions of the timed run (VariantRun::timing); several archs:
  /// {arch: …}. Empty when nothing was paired.
  Json timing = Json::object();
  /// How the evaluation's build and test children were isolated (issue 25): {"mode", "filesystem",
  /// "privileges", "seccomp", "complete"}; null when not recorded (results from the wire, older caches).
  Json isolation = nullptr;

  /// The reference's status string for this result (see ReferenceStatusFor).
  std::string_view ReferenceStatus() const { return ReferenceStatusFor(status); }
  /// Exactly the reference's EvalResult dict: compiled … template_results (no eval_log).
  Json ToReferenceJson() const;
  /// ToReferenceJson() plus "eval_log", "status", "status_detail", "reference_status", "benchmarks",
  /// "timing", "isolation".
  Json ToJson() const;
};

/// Classifies a correctness run that arrived as text (a reference worker's result, stored JSON), the way
/// the reference's evaluator reads it (spec §4.9 perf scale, with typed statuses): exit 0 -> kCorrect
/// (kSkipped when the summary line shows only skipped tests); the runner's messages "timed out" /
/// "inactivity" -> kTestTimeout; "did not exit cleanly" -> judged by the pytest summary line (a passing run
/// stays correct — the reference scored it as a crash); "protocol error: " -> kTestError; negative exit ->
/// kCrash; exit 1 -> kValueMismatch iff a line shows "::test_output_shapes_match" + whitespace + "PASSED",
/// kShapeMismatch if it shows FAILED/ERROR, else kTestsFailed; 2/3/4/5 -> the pytest statuses; other ->
/// kTestError. Local runs never come here: their harness hands a typed Classification.
Classification ClassifyFromWire(const ProcessResult& run);

/// Options of ConvertTestResult.
struct ConvertOptions {
  std::string variant = "custom";  ///< variant key, used in log lines
  /// The harness's typed verdicts of the candidate's runs (local runs). Absent: classified from the
  /// results' text with ClassifyFromWire (results from the wire).
  std::optional<Classification> correctness;
  std::optional<Classification> performance;
  /// The typed verdict of the reference's correctness run (absent: its exit code decides, as on the wire).
  std::optional<Classification> reference_correctness;
  /// The paired timing of the candidate against the reference (VariantRun::timing): where a benchmark has a
  /// paired record, its speedup is the record's median per-round ratio (with its confidence interval) instead
  /// of the ratio of the two sides' means.
  std::optional<PairedTiming> timing;
  size_t log_cap_chars = 16000;    ///< cap of each pytest log excerpt
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

/// compute_performance_score (spec §4.9): perf_score + runtime_improvement when > 0; otherwise
/// perf_score + 1/runtime when runtime_improvement == -1, correct and runtime > 0; else perf_score.
/// Throws kf::Error(kInvalidArgument, "perf_score is still -1, …") for an unevaluated result.
double ComputePerformanceScore(const EvalResult& result);

/// The verdict for a candidate whose code could not be extracted (perf 0); the log holds its stderr.
EvalResult ExtractionFailureResult(const ProcessResult& extract);

/// The verdict for a failed build (perf 1): kBuildTimeout when `reason` is a time limit (IsTimeLimit) — or,
/// for a result from the wire (no reason), when the message says "timed out"/"inactivity" — else
/// kBuildError. The log holds the post-processed compiler output (with `project_dir` shortened).
EvalResult BuildFailureResult(const ProcessResult& build, std::optional<TerminationReason> reason = std::nullopt,
                              std::string_view project_dir = {});

}  // namespace kf
