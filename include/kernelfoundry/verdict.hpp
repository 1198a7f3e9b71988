// Verdict vocabulary shared by every stage: how a child process ended (TerminationReason) and what an
// evaluation concluded (EvalStatus, Classification).
//
// Contract:
//  * One enum each, defined once here (core), so that exec (which produces TerminationReason), the harnesses
//    (which classify their runs) and scoring (which combines classifications into an EvalResult) share the
//    same values without copies or lossy mappings.
//  * Names are stable snake_case strings; they appear in JSON, the database (eval_log's first line) and the
//    CLI. FromName functions are their exact inverses.
//  * Every EvalStatus maps to the reference's perf_score (reference spec §4.9: 0 extraction failed /
//    evaluation error, 1 not compiled, 2 crash/timeout/odd pytest exit, 3 tests failed, 4 value mismatch,
//    5 correct) and to its status string (correct / compiled / error). The statuses we add keep that scale:
//    a status that says nothing about the candidate (canceled, infrastructure_error) scores 0 and is never
//    cached as a verdict (IsVerdictOfCandidate).
//  * Pure functions and constant tables; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kf {

/// Why a child process stopped.
enum class TerminationReason {
  kExited,          ///< exited on its own (any exit code)
  kSignaled,        ///< killed by a signal it did not get from us (e.g. SIGSEGV)
  kWallTimeout,     ///< the wall-clock limit elapsed
  kInactivity,      ///< no output bytes for the inactivity limit
  kEndMarkerGrace,  ///< end marker seen, process did not exit within the marker's grace
  kMemoryLimit,     ///< memory limit hit (cgroup OOM kill, or allocation failure under RLIMIT_AS)
  kProcessLimit,    ///< process limit hit (cgroup pids.max refused a fork)
  kOutputLimit,     ///< one stream produced more than the output kill limit
  kCpuLimit,        ///< RLIMIT_CPU exceeded (SIGXCPU / SIGKILL)
  kFileSizeLimit,   ///< RLIMIT_FSIZE exceeded (SIGXFSZ)
  kSpawnFailed,     ///< could not start (not found, exec error, bad cwd)
  kCanceled,        ///< the caller cancelled the run (ProcessOptions::stop); the tree was killed
};

/// "exited", "signaled", "wall_timeout", "inactivity", "end_marker_grace", "memory_limit", "process_limit",
/// "output_limit", "cpu_limit", "file_size_limit", "spawn_failed", "canceled".
const char* TerminationReasonName(TerminationReason reason);
/// Inverse of TerminationReasonName; nullopt for an unknown name.
std::optional<TerminationReason> TerminationReasonFromName(std::string_view name);
/// True for the reasons that mean "a time limit fired" (wall, inactivity, CPU).
bool IsTimeLimit(TerminationReason reason);
/// True for the resource limits (memory, processes, output, file size).
bool IsResourceLimit(TerminationReason reason);

/// The outcome of evaluating one candidate. The comment gives the reference perf_score each maps to.
enum class EvalStatus {
  kNotEvaluated,             ///< -1: nothing scored yet
  kCorrect,                  ///< 5: correct, timed, speedup against the reference
  kNoisy,                    ///< 5: correct and timed, but the speedup's interval is wider than the target
  kNoReference,              ///< 5: correct and timed, but no reference timing to compare with
  kNoMeasurement,            ///< 5: correct, but a benchmark has no valid timing
  kReferenceOnly,            ///< 5: only the reference was tested (B20: the reference returned None)
  kValueMismatch,            ///< 4: a correctness test failed, the output shape test passed
  kOutputChangedUnderTiming, ///< 4: outputs of timed calls differ from the reference's for the same input
  kShapeMismatch,            ///< 3: the output shape test failed
  kTestsFailed,              ///< 3: tests failed, no shape test result
  kInputMutated,             ///< 3: the candidate wrote into its inputs during the timed calls
  kSuspicious,               ///< 2: correct, but its timing cannot be trusted (see the detail)
  kCrash,                    ///< 2: the test process was killed by a signal (segfault, abort…)
  kTestTimeout,              ///< 2: wall-clock or inactivity timeout of the test process
  kResourceLimit,            ///< 2: memory, output, process or CPU-time limit hit
  kTestError,                ///< 2: the test run gave no usable report, or an unexpected exit code
  kNoTestResult,             ///< 2: no correctness result at all
  kPytestInterrupted,        ///< 2: pytest exit code 2
  kPytestInternal,           ///< 2: pytest exit code 3
  kPytestUsage,              ///< 2: pytest exit code 4
  kNoTestsCollected,         ///< 2: pytest exit code 5
  kBuildError,               ///< 1: the build failed
  kBuildTimeout,             ///< 1: the build was killed at a time limit
  kExtractionFailed,         ///< 0: the candidate code could not be put into the blocks
  kIsolationViolation,       ///< 0: the candidate's process made a system call the sandbox forbids (killed by
                             ///<    SIGSYS: loading a kernel module, kexec, mount, reboot, swap, bpf, raw I/O …)
  kSkipped,                  ///< 0: not evaluated here (e.g. every correctness test was skipped: no device)
  kReferenceFailed,          ///< 0: the reference's own run failed; nothing can be compared
  kEvaluationError,          ///< 0: an exception during evaluation (set by the caller)
  kInfrastructureError,      ///< 0: our own environment failed (cache dir, work dir, interpreter), not the candidate
  kCanceled,                 ///< 0: the evaluation was cancelled before it finished
};

/// Stable snake_case name ("correct", "value_mismatch", …).
std::string_view EvalStatusName(EvalStatus status);
/// Inverse of EvalStatusName; nullopt for an unknown name.
std::optional<EvalStatus> EvalStatusFromName(std::string_view name);
/// The reference's perf_score for a status (-1 for kNotEvaluated), see the enum comments.
int PerfScoreFor(EvalStatus status);
/// The reference's status string: "correct" (perf 5), "compiled" (2–4), "error" (0–1 and not evaluated).
std::string_view ReferenceStatusFor(EvalStatus status);
/// True for the statuses of the "correct" family (perf_score 5).
bool IsCorrectFamily(EvalStatus status);
/// False for statuses that say nothing about the candidate (not evaluated, canceled, infrastructure error,
/// evaluation error): such verdicts must never be cached or used to rank a candidate.
bool IsVerdictOfCandidate(EvalStatus status);

/// A typed verdict of one run: the status and one line saying why.
struct Classification {
  EvalStatus status = EvalStatus::kNotEvaluated;
  std::string detail;
  bool operator==(const Classification&) const = default;
};

/// The verdict a terminated test process gets from its termination reason alone, when that reason decides
/// it (timeouts, limits, spawn failures, a signal, cancellation); nullopt for kExited and kEndMarkerGrace,
/// whose verdict depends on what the run reported. `returncode` names the signal for kSignaled; `message`
/// (the runner's note) is appended to the detail.
std::optional<Classification> ClassifyTermination(TerminationReason reason, int returncode,
                                                  std::string_view message = {});

/// "SIGSEGV", "SIGABRT", … for the common signals, else "signal N".
std::string SignalName(int signal_number);

}  // namespace kf
