// Harness — how a task's candidate and reference are built and tested (reference spec §4.3, §4.4).
//
// A harness knows one package kind's conventions. Two exist, described by one table (HarnessDescriptors):
//  * `pytest` (the reference's format; the default): task.py with a TestBase class, build hooks run through
//    `python -m kernelfoundry.build_target`, tests through pytest with the kernelfoundry plugin;
//  * `native` (`harness: native`): C++/OpenMP, OpenCL and CUDA test programs built by the task's own commands
//    and speaking the task SDK protocol (include/kernelfoundry/sdk/task_sdk.hpp).
// Adding a kind is one row in the table (src/harness/kinds.cc) plus its implementation file.
//
// The pipeline stages (evaluate.hpp) own what is the same for every harness: work directories, the task
// materialised on disk, artifacts overlaid, several GPU archs, worker_info, progress events, device slots,
// scoring. A harness is handed a prepared directory and returns plain results:
//  * Build(): runs one build hook (candidate or reference) and returns its BuildResult (artifacts keyed
//    relative to the task tree; worker_info left for the stage).
//  * Correctness() / Performance(): one test run each, returning the wire-format ProcessResult AND a typed
//    Classification. Both harnesses read their test programs' results from a result document written to a
//    pipe (never a file the candidate could write, never parsed from stdout): every test the task declares
//    must be reported, or the run is a test_error.
// Every child process goes through kf::RunProcess with the request's limits and cancellation token.
// Implementations are stateless and may be called from several threads at once.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/paired_wire.hpp"
#include "kernelfoundry/process.hpp"
#include "kernelfoundry/results.hpp"
#include "kernelfoundry/task.hpp"
#include "kernelfoundry/verdict.hpp"

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
  /// Memory of each build and test run (its whole process tree), in bytes; nullopt: none. Enforced only by a
  /// memory cgroup (RLIMIT_AS would cap address space, which CUDA and torch reserve far beyond what they use);
  /// a run beyond it is killed and the verdict is resource_limit ("memory limit exceeded"). Default:
  /// DefaultMemoryLimit().
  std::optional<uint64_t> memory_limit_bytes = DefaultMemoryLimit();
  /// Tasks (processes and threads) of each build and test run's tree; nullopt: none. Enforced only by a pids
  /// cgroup (RLIMIT_NPROC counts every process of the user); a fork bomb is killed at once and the verdict is
  /// resource_limit ("process limit exceeded"). Default: DefaultProcessLimit().
  std::optional<uint64_t> process_limit = DefaultProcessLimit();

  /// Reads build_timeout, build_output_inactivity_timeout, test_timeout, test_output_inactivity_timeout
  /// (seconds, int or float), memory_limit (ConfigView::Bytes: "8G", bytes; 0, null or "off": none) and
  /// process_limit (a whole number; 0, null or "off": none) from a task config; absent keys keep the defaults above. Throws kf::Error(kInvalidArgument, file "config.yaml",
  /// field = key) for a negative or non-numeric value.
  static HarnessLimits FromConfig(const Json& config);

  /// The memory limit of a task that sets none: $KF_MEMORY_LIMIT ("16G", bytes; "off" or 0: none), else three
  /// quarters of the machine's physical memory, so one candidate that allocates without end is killed before the
  /// kernel's OOM killer picks a process of the host (kf, its database, a broker). Throws kf::Error naming
  /// KF_MEMORY_LIMIT when it is not a size.
  static std::optional<uint64_t> DefaultMemoryLimit();
  /// The process limit of a task that sets none: $KF_PROCESS_LIMIT (a whole number; "off" or 0: none), else 4096
  /// tasks — far above what a build (the compiler jobs) or a test (torch's and OpenMP's threads) starts on a large
  /// machine, far below what exhausts the host's pid space. Throws kf::Error naming KF_PROCESS_LIMIT when it is
  /// not a whole number.
  static std::optional<uint64_t> DefaultProcessLimit();
};

/// The phases of an evaluation, for live progress.
enum class Phase { kBuildCandidate, kBuildReference, kCorrectness, kPerformance, kProfile };
/// "build candidate", "build reference", "correctness", "performance", "profile".
const char* PhaseName(Phase phase);

/// Live progress of one phase. Emitted twice per phase by the stages: at the start (finished = false) and
/// at the end.
struct PhaseEvent {
  Phase phase = Phase::kCorrectness;
  std::string variant;         ///< "custom", "custom_16_32", "reference", a paired timing run "custom+reference"
                               ///< (builds: "custom" / "reference")
  std::string gpu_arch;        ///< the arch tested (builds: the normalised arch list)
  bool finished = false;       ///< false: the phase starts now
  bool ok = false;             ///< when finished: the phase succeeded
  double elapsed_s = 0;        ///< when finished: wall seconds of the phase
  std::string note;            ///< when finished and failed: why (the verdict's detail or the build message)
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
  /// What the build may read besides its work dir, the task-side resources and the system (issue 25): the
  /// published precompiled headers.
  std::vector<std::filesystem::path> readable;
  OutputLineFn on_line;
  std::stop_token stop;             ///< cancellation: kills the build's process tree
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

/// One test variant: the candidate (possibly one template instantiation) or the reference.
struct TestVariant {
  std::string key;                      ///< "custom", "custom_<p1>_<p2>…", "reference"
  bool reference = false;               ///< run the reference implementation (pytest: --ref)
  std::optional<Json> template_params;  ///< JSON array of template arguments, e.g. [16, 32]
};

/// What one test run (correctness or performance) needs. task_dir holds the task with the build
/// artifacts overlaid.
struct TestRequest {
  TestVariant variant;
  std::filesystem::path work_dir;   ///< private to this run
  std::filesystem::path task_dir;   ///< the task tree (cwd of the tests)
  std::string gpu_arch;             ///< one arch
  Json runtime_params = nullptr;    ///< hyperparameters.runtime (passed when a non-empty object)
  /// The tests this run must report (the task's correctness_tests or profile_tests, ids as in the Task:
  /// "TestX::test_a[512]" for pytest, test names for native). A run that does not report each of them is a
  /// test_error. Empty: whatever the run reports counts.
  std::vector<std::string> expected_tests;
  HarnessLimits limits;
  std::map<std::string, std::string> env;
  OutputLineFn on_line;
  std::stop_token stop;             ///< cancellation: kills the run's process tree
  /// Performance runs only: time `variant` against this reference variant in the same process, interleaved
  /// (paired timing, paired.hpp). nullopt: the variant is timed alone.
  std::optional<TestVariant> paired_with;
  /// Paired timing options (kernelfoundry.paired.DEFAULTS keys: budget_s, target_rel_half_width, …) from
  /// config eval_config.timing; an object.
  Json timing_options = Json::object();
  /// Correctness runs of a candidate variant on the host: the candidate's modules run in a process of their own,
  /// never in the test process that computes the reference and checks (pytest: --kf-isolate,
  /// kernelfoundry.isolation; config eval_config.candidate_process). The native harness ignores it (its tasks
  /// declare their executor, sdk/remote.hpp).
  bool isolate_candidate = false;
};

/// The result of one correctness or performance run.
struct PhaseRun {
  /// Wire format: returncode, output, message (the runner's note, protocol problems), output_data
  /// ({"runtimes": {...}} for a performance run). A run the harness judged a failure although the process
  /// exited 0 carries returncode 70 (EX_SOFTWARE), so that the reference's text-based scoring (a reference
  /// client of our farm) cannot mistake it for a pass.
  ProcessResult result;
  /// The typed verdict: kCorrect when every expected test passed (performance: and reported runtimes);
  /// otherwise the failure's status and detail.
  Classification verdict;
  TerminationReason reason = TerminationReason::kExited;
  double wall_s = 0;
  /// A paired performance run: the reference side of the same run (output_data {"runtimes": …}) and its
  /// verdict; nullopt otherwise.
  std::optional<ProcessResult> reference_result;
  std::optional<Classification> reference_verdict;
  /// A paired performance run: its timing records and conditions as the test run reported them
  /// (kernelfoundry/paired_record.hpp); nullopt otherwise. Benchmarks the run could not pair have paired = false.
  std::optional<PairedTiming> timing;
  /// Where the candidate's code ran, as the test run reported it ("executor (module, …)" or "test process:
  /// <why>", kernelfoundry.isolation.report); empty when the run did not say.
  std::string candidate_process;
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
  /// Runs one variant's correctness tests. Never throws for a failing test.
  virtual PhaseRun Correctness(const TestRequest& request) const = 0;
  /// Runs one variant's performance tests; a passing run has output_data {"runtimes": {test: [ms, …]}}.
  /// Never throws for a failing test.
  virtual PhaseRun Performance(const TestRequest& request) const = 0;
  /// The command of a profiler pass over one variant's performance tests (kernelfoundry/profile.hpp): the
  /// ProcessOptions (argv — never a shell string, B7 —, cwd, environment, time limits, result pipe) of a
  /// single-variant run of the tests in `request`, with its template and runtime parameters, for a
  /// profiler to wrap. Its report must carry "timed_calls" when perf's control FIFOs are set. nullopt (the
  /// default) when this harness cannot be profiled: the pass then records why.
  virtual std::optional<ProcessOptions> ProfileCommand(const TestRequest& request) const;
};

/// A harness kind: how core sees it (TaskKind: tests, structure checks), how to make one, and what it does
/// differently in the pipeline.
struct HarnessDescriptor {
  TaskKind kind;
  /// Makes the harness for a task of this kind. Throws kf::Error(kInvalidArgument, "config.yaml", key) for a
  /// task whose config this kind cannot run (checked before anything is built: kf run exits 3).
  std::function<std::unique_ptr<Harness>(const Task& task)> make;
  /// True when the reference variant runs what the candidate build produced (native: one test program,
  /// `--kf-ref` selects the reference), so a reference-only run (kf validate --run) must build it too.
  bool reference_uses_candidate_build = false;
  /// What kf validate checks for this kind, for its report.
  std::vector<std::string> checks;
};

/// The table of harness kinds (pytest first: it is the default).
const std::vector<HarnessDescriptor>& HarnessDescriptors();
/// The descriptor named by config `harness:` (absent or null: pytest). Throws kf::Error(kInvalidArgument,
/// config_file, "harness") for an unknown or non-string value.
const HarnessDescriptor& HarnessDescriptorFor(const Json& config, const std::string& config_file = "config.yaml");
/// The TaskKindLookup over the table, for TaskCreateOptions::kinds and Task::Problems.
TaskKindLookup HarnessTaskKinds();
/// HarnessDescriptorFor(task.config).make(task).
std::unique_ptr<Harness> MakeHarness(const Task& task);

/// The Python interpreter for task-side code: kf::TaskPythonInterpreter() (resources.hpp).
std::string TaskPython();
/// The directory holding the `kernelfoundry` Python package: kf::TaskPythonDir() (resources.hpp); throws its
/// kf::Error(kNotFound) when there is none.
std::filesystem::path TaskPythonPath();

/// The end-of-run marker for pytest runs: pytest's final summary line (kernelfoundry/pytest_summary.hpp).
/// Its kill message says "All tests passed but the process did not exit cleanly and had to be terminated."
/// when the line reports passes and no failure or error, else "" (the reference's messages).
EndMarker PytestEndMarker(std::chrono::milliseconds grace = std::chrono::milliseconds{10'000});

}  // namespace kf
