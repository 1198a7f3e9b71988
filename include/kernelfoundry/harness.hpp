// Harness — how a task's candidate and reference are built and tested (reference spec §4.3, §4.4).
//
// A harness knows one task flavour's conventions: the `pytest` harness (reference-format tasks: task.py
// with a TestBase class, the build hooks run through `python -m kernelfoundry.build_target`, tests through
// pytest with the kernelfoundry plugin) and, later, a `native` harness (C++/OpenCL/CUDA test programs).
// MakeHarness picks one from the task config key `harness:` (default `pytest` when task.py exists).
//
// The pipeline stages (evaluate.hpp) own everything that is the same for every harness: fresh work
// directories, materialising the task, overlaying artifacts, several GPU archs, worker_info, scoring. A
// harness is handed a prepared directory and returns plain results:
//  * Build(): runs one build hook (candidate or reference) in request.task_dir and returns its BuildResult
//    (result + artifacts keyed relative to the task tree; worker_info left empty for the stage to fill).
//  * Test(): runs one variant's correctness run and, only when it passed, its performance run, and returns
//    the TestResult (performance_result.output_data = {"runtimes": {...}}) with typed outcomes.
// Every child process goes through kf::RunProcess with the request's limits. Implementations are stateless
// and may be called from several threads at once.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/process.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/task.hpp"
#include "kernelfoundry/test_discovery.hpp"  // DefaultCacheDir: the persistent cache

namespace kf {

/// Which build hook runs: the candidate's (`build`) or the reference's (`build_reference`).
enum class BuildTarget { kCandidate, kReference };
/// "custom" / "reference" (the reference's mode names).
const char* BuildTargetName(BuildTarget target);

/// Time limits of build and test subprocesses. Defaults (B13: the reference's layers disagree; we pick one
/// value each and document it here and in README): build_timeout 120 s (the code default), build inactivity
/// 150 s, test_timeout 120 s per subprocess (the code default), test inactivity 100 s (base.yaml; the
/// reference's code default of 30 s kills slow-but-healthy JIT compiles), end-marker grace 10 s.
/// A config value of null or 0 for an inactivity timeout disables it.
struct HarnessLimits {
  std::chrono::milliseconds build_timeout{120'000};
  std::optional<std::chrono::milliseconds> build_inactivity_timeout{std::chrono::milliseconds{150'000}};
  std::chrono::milliseconds test_timeout{120'000};
  std::optional<std::chrono::milliseconds> test_inactivity_timeout{std::chrono::milliseconds{100'000}};
  /// After pytest printed its summary line, how long the process may take to exit before it is killed.
  std::chrono::milliseconds end_marker_grace{10'000};

  /// Reads build_timeout, build_output_inactivity_timeout, test_timeout, test_output_inactivity_timeout
  /// (seconds, int or float) from a task config; absent keys keep the defaults above. Throws
  /// kf::Error(kInvalidArgument, file "config.yaml", field = key) for a negative or non-numeric value.
  static HarnessLimits FromConfig(const Json& config);
};

/// Live progress of one phase. Emitted twice per phase: at the start (finished = false) and at the end.
enum class Phase { kBuildCandidate, kBuildReference, kCorrectness, kPerformance };
/// "build candidate", "build reference", "correctness", "performance".
const char* PhaseName(Phase phase);

struct PhaseEvent {
  Phase phase = Phase::kCorrectness;
  std::string variant;         ///< "custom", "custom_16_32", "reference" (builds: "custom" / "reference")
  std::string gpu_arch;        ///< the arch tested (builds: the normalised arch list)
  bool finished = false;       ///< false: the phase starts now
  bool ok = false;             ///< when finished: the phase succeeded
  double elapsed_s = 0;        ///< when finished: wall seconds of the phase
  std::string note;            ///< when finished and failed: why (termination message / first error)
};
/// Called from the stage threads (possibly concurrently); must be thread-safe.
using ProgressFn = std::function<void(const PhaseEvent&)>;
/// One line of a child's output (is_stderr, line), for verbose streaming; must be thread-safe.
using OutputLineFn = std::function<void(bool is_stderr, const std::string& line)>;

/// What one build run needs. The stage has materialised the task into task_dir (= work_dir/task_data).
struct BuildRequest {
  BuildTarget target = BuildTarget::kCandidate;
  std::filesystem::path work_dir;   ///< private to this build; the harness may write files here
  std::filesystem::path task_dir;   ///< the task tree (cwd of the hook)
  std::string gpu_arch;             ///< passed to the hook (normalised comma list, e.g. "cpu")
  Json hyperparameters = nullptr;   ///< the task's {"buildtime": …, "runtime": …} or null
  HarnessLimits limits;
  std::map<std::string, std::string> env;   ///< extra environment (the stage adds KF_CACHE_DIR etc.)
  OutputLineFn on_line;
};

/// One test variant: the candidate (possibly one template instantiation) or the reference.
struct TestVariant {
  std::string key;                      ///< "custom", "custom_<p1>_<p2>…", "reference"
  bool reference = false;               ///< run the reference implementation (pytest: --ref)
  std::optional<Json> template_params;  ///< JSON array of template arguments, e.g. [16, 32]
};

/// What one variant's test run needs. task_dir holds the task with the build artifacts overlaid.
struct TestRequest {
  TestVariant variant;
  std::filesystem::path work_dir;   ///< private to this run; outputs (runtimes) are written here
  std::filesystem::path task_dir;   ///< the task tree (cwd of the tests)
  std::string gpu_arch;             ///< one arch
  Json runtime_params = nullptr;    ///< hyperparameters.runtime (passed when a non-empty object)
  HarnessLimits limits;
  std::map<std::string, std::string> env;
  ProgressFn progress;
  OutputLineFn on_line;
};

/// Typed outcome of one test phase, beside the wire-format ProcessResult.
enum class PhaseOutcome {
  kNotRun,        ///< skipped (correctness failed, so no performance run)
  kPassed,        ///< exit 0 (performance: and the runtimes file was read)
  kTestsFailed,   ///< pytest exit 1: some test failed
  kError,         ///< other non-zero exit (usage/internal error, no tests collected, crash by signal)
  kTimedOut,      ///< killed at the wall-clock limit
  kInactive,      ///< killed after the inactivity limit
  kKilled,        ///< killed for a resource limit (memory, output, CPU)
  kSpawnFailed,   ///< could not start the interpreter
  kNoRuntimes,    ///< performance run passed but its runtimes file is missing or unreadable
};
/// "not_run", "passed", "tests_failed", "error", "timed_out", "inactive", "killed", "spawn_failed",
/// "no_runtimes".
const char* PhaseOutcomeName(PhaseOutcome outcome);

/// The result of one variant on one arch.
struct VariantRun {
  /// correctness_result / performance_result (wire format; worker_info left empty for the stage). When
  /// pytest printed its summary but had to be killed after the grace period, returncode is the exit code
  /// the summary implies (0 when it passed) and message says it was terminated (the reference scored such
  /// a passing run as a crash).
  TestResult result;
  PhaseOutcome correctness = PhaseOutcome::kNotRun;
  PhaseOutcome performance = PhaseOutcome::kNotRun;
  std::optional<TerminationReason> correctness_stop;   ///< how the runner ended each run (when run)
  std::optional<TerminationReason> performance_stop;
  double correctness_s = 0, performance_s = 0;         ///< wall seconds of each run (0 when not run)
};

/// The result of one build.
struct BuildRun {
  BuildResult result;        ///< worker_info empty; artifacts keyed relative to the task tree
  TerminationReason reason = TerminationReason::kExited;
  double wall_s = 0;
  std::filesystem::path task_dir;   ///< where the hook ran (set by the stage; removed unless kept)
  /// Set by the build stage when OUR environment failed (cache dir, work dir, interpreter/shell missing):
  /// what failed, naming the path. The verdict is infrastructure_error, never the candidate's score.
  std::optional<std::string> infrastructure_error;
};

/// The interface every harness implements. Stateless; thread-safe.
class Harness {
 public:
  virtual ~Harness() = default;
  /// "pytest" / "native".
  virtual std::string_view Name() const = 0;
  /// Runs one build hook. Never throws for a failing build (that is a BuildResult with a non-zero
  /// returncode and a message); throws kf::Error only for a broken request (kIO: cannot write inputs).
  virtual BuildRun Build(const BuildRequest& request) const = 0;
  /// Runs one variant's correctness run and, when it passed, its performance run. Never throws for a
  /// failing test.
  virtual VariantRun Test(const TestRequest& request) const = 0;
  /// True when the reference variant runs what the candidate build produced (native: one test program,
  /// `--kf-ref` selects the reference), so a reference-only run (kf validate --run) must build it too.
  virtual bool ReferenceUsesCandidateBuild() const { return false; }
};

/// Chooses the harness from task.config["harness"]: "pytest" (the default when task.py exists).
/// Throws kf::Error(kUnsupported, "config.yaml", "harness") for an unknown or not-yet-available harness,
/// kf::Error(kInvalidArgument) when no harness is named and the task has no task.py.
std::unique_ptr<Harness> MakeHarness(const Task& task);

/// The pytest harness (reference-format tasks).
std::unique_ptr<Harness> MakePytestHarness();

/// The native harness (C++/OpenCL/CUDA test programs speaking the task SDK protocol, task_sdk.hpp); reads
/// build, cmake, test_executable and artifacts from the task config.
std::unique_ptr<Harness> MakeNativeHarness(const Json& config);

// ---- helpers shared by harnesses ----

/// Keys build outputs relative to the task tree (B15 fixed): a relative path is resolved against task_dir,
/// an absolute one is used as is; symlinks are resolved; a directory contributes its regular files.
/// Meta = the file's mode & 0777 and mtime. Throws kf::Error(kNotFound, field = the path) for a path that
/// does not exist and kf::Error(kUnsafe, field = the path) for one that resolves outside task_dir.
MemoryFileMap CollectArtifacts(const std::filesystem::path& task_dir, const std::vector<std::string>& paths);

/// The wire message for how a child ended, as the reference words it: "Process timed out after <n>
/// seconds", "Process killed due to inactivity", …; nullopt for a normal exit.
std::optional<std::string> TerminationMessage(const ProcessRun& run, const ProcessOptions& options);

/// The Python interpreter for task-side code: $KF_PYTHON, else /usr/bin/python3.
std::string TaskPython();
/// The directory holding the `kernelfoundry` Python package: $KF_PYTHON_DIR, else the build-time path.
std::filesystem::path TaskPythonPath();
}  // namespace kf
