// Evaluate — the evaluation pipeline: candidate code -> blocks -> build -> test -> score (reference spec
// §4.1–§4.4, §4.9; the reference's Evaluator.run + build/test worker tasks, run locally).
//
// Stages (each usable on its own):
//  * Build stage: the candidate (`has_build_step`) and the reference (`has_reference_build_step`) are
//    built in parallel threads, each in a fresh work dir `<work_root>/kf_build_<custom|reference>_*` holding
//    the materialised task (task_data/) and the harness's inputs (input.json {gpu_arch, hyperparameters}).
//  * Test stage: per GPU arch (config gpu_arch "a, b" is split AND stripped, B6) one work dir
//    `<work_root>/kf_test_*`: the task materialised, the candidate's then the reference's artifacts overlaid,
//    then every variant — `custom` (or `custom_<p1>_<p2>…`, one per template instantiation found in the
//    EVOLVE code) and `reference` — run through the harness (correctness, then performance when it passed).
//    Per-arch results are merged with TestResult::Merge. Every Build/TestResult carries worker_info.
//    B13: the documented eval_config knobs (warmup_min_time, warmup_min_iters, inner_loop_min_time,
//    num_perf_trials -> perf_trials_min_iters, perf_trials_min_time) reach measure_runtime through
//    KERNELFOUNDRY_MEASURE_OPTIONS (only the keys the config sets).
//  * Scoring: per arch ConvertTestResult (CombineTemplateResults for several variants), then
//    CombineArchResults; a build failure is BuildFailureResult (perf 1); no reference gives the typed status
//    "no reference", never NaN; a reference-only run (B20) is ReferenceOnlyResult.
// Where the stages run is a seam (Ninja's CommandRunner idea): a StageRunner builds and tests; the
// LocalStageRunner runs them here through a Harness (injectable, so every branch of Evaluate is testable
// with a fake in milliseconds), a queue stage runner sends them to workers. Timed phases take their device
// exclusively (device_slots.hpp). Cancellation (EvaluateOptions::stop) kills the running tree and returns
// the verdict kCanceled.
// Work dirs are removed afterwards unless keep_workdir (also when kf is stopped by a signal). Builds are cached
// on kf's side (src/pipeline/build_cache.hpp), so a second run of an identical candidate reuses its build;
// children cannot write the cache (filesystem isolation, src/harness/isolation.hpp).
//  * Profiler passes (kernelfoundry/profile.hpp): after a variant's performance run, the profilers the
//    config selects run as separate passes under the device's timing slot; their results go to
//    TestResult.trace_results ("perf.000", …) and, parsed, to EvalResult.profiler_data ("perf", "perf_ref").
//    They never change a verdict and never enter runtimes. EvaluateOptions::profile forces them on or off.
// Thread-safety: Evaluate may run concurrently on different tasks; callbacks are called from worker threads.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernelfoundry/device_slots.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/scoring.hpp"
#include "kernelfoundry/task.hpp"

namespace kf {

class StageRunner;

/// Options of the stages and of Evaluate.
struct EvaluateOptions {
  std::optional<std::string> gpu_arch;   ///< overrides config gpu_arch ("a,b" = several archs)
  bool test_candidate = true;            ///< false: reference only (`kf validate --run`)
  bool test_reference = true;            ///< false: --no-reference. Config `test_reference: false` also skips it.
  bool keep_workdir = false;             ///< keep the kf_build_* / kf_test_* directories
  /// Only the correctness phase: no variant is timed (benchmarks get no runtimes). `kf validate --run`'s
  /// low-signal check uses it.
  bool correctness_only = false;
  /// Extra environment of the test processes (after kf's own variables, so it may override them), e.g.
  /// KF_FAKE_OUTPUT=zeros for the low-signal check (kernelfoundry.testing / the task SDK's checkers).
  std::map<std::string, std::string> test_env;
  std::filesystem::path work_root;       ///< parent of the work dirs; empty = the system temp dir
  ProgressFn progress;                   ///< live phase events
  OutputLineFn on_output_line;           ///< every output line of every child (verbose mode)
  /// Cancellation: when stop is requested, the running child tree is killed and Evaluate returns a verdict
  /// with status kCanceled as soon as possible (no further phases start).
  std::stop_token stop;
  /// Where the stages run; nullptr = a LocalStageRunner over `harness`.
  StageRunner* runner = nullptr;
  /// The harness of a local run; nullptr = MakeHarness(task) (the kind named by config `harness:`).
  const Harness* harness = nullptr;
  /// Device exclusivity for timed phases; nullptr = ProcessDeviceSlots().
  DeviceSlots* slots = nullptr;
  /// Profiler passes: nullopt = as the config says (eval_config.profile_custom_model, default true;
  /// eval_config.profile_original_model, default false); true = every variant (`kf run --profile`);
  /// false = none.
  std::optional<bool> profile;
};

/// "a, b,,c " -> {"a", "b", "c"} (B6: entries stripped, empty ones dropped).
std::vector<std::string> SplitGpuArchs(std::string_view gpu_arch);

/// The archs to test: options.gpu_arch, else config gpu_arch. Throws kf::Error(kInvalidArgument,
/// "config.yaml", "gpu_arch") when neither names an arch (or the config value is not a string).
std::vector<std::string> ResolveGpuArchs(const Task& task, const EvaluateOptions& options);

/// Template instantiations of the candidate (spec §4.4.1): for every `forward_templated<…>` in `code`, its
/// comma-separated arguments typed as int (no '.'), float, bool (true/false) or string; returned as JSON
/// arrays, duplicates removed, first-seen order. Empty when the code is not templated.
std::vector<Json> FindTemplateParameters(std::string_view code);

/// The variant key of a template instantiation: "custom_" + the Python str() of each value joined by "_".
std::string TemplateVariantKey(const Json& params);

/// The test variants of a task: the candidate's (one per template instantiation of its EVOLVE code, else
/// "custom") when `candidate`, then "reference" when `reference`.
std::vector<TestVariant> MakeTestVariants(const Task& task, bool candidate, bool reference);

/// One child process's result, named for the job log ("build custom", "test custom cpu correctness", …).
struct ProcessLog {
  std::string name;
  ProcessResult result;
  Json worker_info = nullptr;
  /// The name the reference's job_logs rows give it (BuildLogName / TestLogName), e.g. "build_reference".
  std::string log_name{};
};

/// The reference's job-log name of a build (its Evaluator logs raw results under these prefixes):
/// "build" for the candidate's, "build_reference" for the reference's.
std::string BuildLogName(bool reference);
/// The reference's job-log name of one test run of variant `variant` ("custom", "custom_4_8", "reference"):
/// "test_<variant>_<run>" for run "correctness" / "performance", and "test_<variant>_trace_<trace>" for
/// run "trace" with `trace` = the profiler pass's trace_results key.
std::string TestLogName(std::string_view variant, std::string_view run, std::string_view trace = {});

/// Wall seconds of one phase ("build custom", "correctness custom cpu", …).
struct PhaseTiming {
  std::string name;
  double seconds = 0;
};

/// What the test stage got for one variant on one arch.
struct VariantRun {
  /// Wire format: correctness_result / performance_result (worker_info set by the stage).
  TestResult result;
  std::optional<Classification> correctness;  ///< the harness's verdict of the correctness run (nullopt: not run)
  std::optional<Classification> performance;  ///< … of the performance run (nullopt: not run)
  double correctness_s = 0, performance_s = 0; ///< wall seconds of each run (0 when not run)
  double profile_s = 0;                        ///< wall seconds of the profiler passes (0 when none ran)
  /// The candidate's paired timing against the reference (PhaseRun::timing, with the conditions of the run:
  /// threads, allocator settings, load before/after); nullopt when the variant was timed alone.
  std::optional<PairedTiming> timing;
  /// Where the candidate's code ran in its correctness run (PhaseRun::candidate_process); empty: not reported.
  std::string candidate_process;
};

/// What the build stage did. nullopt = that target was not built (no build step, or not wanted).
struct BuildStageResult {
  std::optional<BuildRun> candidate;
  std::optional<BuildRun> reference;
  std::vector<std::filesystem::path> kept_dirs;   ///< work dirs left on disk (keep_workdir)
};

/// Which builds the build stage runs.
struct BuildPlan {
  bool candidate = false;   ///< run the `build` hook
  bool reference = false;   ///< run the `build_reference` hook
  std::string arch_list;    ///< passed to the hooks (the normalised comma list, e.g. "cpu" or "lnl,bmg")
};

/// The one rule for which builds run (Evaluate and the farm's build_custom_task body): the candidate's `build`
/// when the task has a build step and the candidate is tested, or the reference is and `kind` runs the
/// reference on the candidate's build (HarnessDescriptor::reference_uses_candidate_build, native tasks); the
/// `build_reference` hook when the task has a reference build step and the reference is tested. `arch_list`
/// is passed to the hooks as it is.
BuildPlan PlanBuilds(const Task& task, const HarnessDescriptor& kind, bool test_candidate, bool test_reference,
                     std::string arch_list);

/// Builds the wanted targets in parallel (each holding the host shared, DeviceSlots::ForBuild) and stores
/// task.build_result / build_result_reference (with worker_info). Throws kf::Error only when the task
/// cannot be materialised (kIO / kUnsafe / kLimit).
BuildStageResult RunBuildStage(const Harness& harness, Task& task, const BuildPlan& plan,
                               const EvaluateOptions& options);

/// What the test stage did.
struct TestStageResult {
  /// Per arch (in order), per variant (in order): the harness's run with worker_info set.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, VariantRun>>>> per_arch;
  /// Per variant: TestResult::Merge over the archs (one arch: that arch's result).
  std::vector<std::pair<std::string, TestResult>> merged;
  std::vector<std::filesystem::path> kept_dirs;
};

/// Runs every variant on every arch, sequentially, in a tree holding the task and the artifacts of
/// task.build_result and task.build_result_reference: the correctness run (device shared), then — only when
/// it passed — the performance run (device exclusive, DeviceSlots::ForTiming), then the variant's profiler
/// passes (device exclusive; trace_results). Emits the phase events.
/// Stops starting new runs once options.stop is requested.
TestStageResult RunTestStage(const Harness& harness, const Task& task, const std::vector<TestVariant>& variants,
                             const std::vector<std::string>& archs, const EvaluateOptions& options);

/// Where Evaluate's build and test stages run (Ninja's CommandRunner idea). Implementations must honour
/// options.stop and the device slots; they may be called from several threads.
class StageRunner {
 public:
  virtual ~StageRunner() = default;
  /// Runs the builds of `plan` and stores task.build_result / build_result_reference.
  virtual BuildStageResult Build(Task& task, const BuildPlan& plan, const EvaluateOptions& options) = 0;
  /// Runs every variant on every arch.
  virtual TestStageResult Test(const Task& task, const std::vector<TestVariant>& variants,
                               const std::vector<std::string>& archs, const EvaluateOptions& options) = 0;
};

/// Runs the stages in this process with a harness (RunBuildStage / RunTestStage).
class LocalStageRunner final : public StageRunner {
 public:
  /// `harness` must outlive the runner.
  explicit LocalStageRunner(const Harness& harness) : harness_(harness) {}
  BuildStageResult Build(Task& task, const BuildPlan& plan, const EvaluateOptions& options) override;
  TestStageResult Test(const Task& task, const std::vector<TestVariant>& variants,
                       const std::vector<std::string>& archs, const EvaluateOptions& options) override;

 private:
  const Harness& harness_;
};

/// The outcome of Evaluate.
struct Evaluation {
  Task task;                       ///< the candidate task with its build and test results
  EvalResult result;               ///< the verdict (combined over archs)
  double combined_score = -1;      ///< ComputePerformanceScore(result), -1 when not evaluated
  std::vector<std::string> archs;
  std::string input_code;          ///< EVOLVE content before the update (BlocksToStr)
  std::string output_code;         ///< EVOLVE content evaluated
  std::vector<ProcessLog> logs;    ///< every build/test process result, in run order
  std::vector<PhaseTiming> timings;
  double build_s = 0, test_s = 0, wall_s = 0;   ///< stage wall seconds
  std::vector<std::filesystem::path> kept_dirs;
  /// Set when the verdict was reused from the verdict cache (kernelfoundry/verdict_cache.hpp): {"key",
  /// "job_id", "created_at"} of the run that produced it; null for a fresh evaluation.
  Json cached = nullptr;
};

/// Checks the parts of a task's config that the test stage reads (eval_config: a mapping; its threads, allocator,
/// eval_config.timing: its keys, kinds and ranges, processes, removed keys), the profile flags
/// (eval_config.profile_custom_model, profile_original_model: true or false) and the run limits, as Evaluate does
/// before any build (and kf validate). Throws kf::Error (kInvalidArgument) naming config.yaml and the field.
void ValidateTestConfig(const Task& task);

/// Evaluates `candidate` (a block update: the shorthand {"EVOLVE": code} or the full form; nullopt = the
/// task's current blocks) on `task`. Throws kf::Error for unusable input (block update that does not fit
/// the task, no gpu_arch, unknown harness, unwritable work dirs); every candidate failure (extraction,
/// build, crash, timeout, wrong values) is a verdict, not an exception, and so is a cancellation
/// (status kCanceled).
Evaluation Evaluate(const Task& task, const std::optional<BlockUpdate>& candidate, const EvaluateOptions& options);

}  // namespace kf
